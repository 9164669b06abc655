import sys

from ptxcore.gpu.child.main import main

sys.exit(main())
