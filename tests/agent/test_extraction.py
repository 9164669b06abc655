from ptxcore.agent import extract_kernel
from ptxcore.agent.extraction import extraction_feedback
from ptxcore.schema import Language


def test_exactly_one_cpp_block():
    e = extract_kernel("Plan.\n```cpp\n__global__ void k() {}\n```\nDone.")
    assert e.ok and e.code == "__global__ void k() {}\n" and e.blocks_found == 1


def test_no_block_unterminated_block_and_other_fences_are_errors():
    assert not extract_kernel("just words").ok
    assert not extract_kernel("```cpp\nint x; // answer cut off by max_tokens").ok
    e = extract_kernel("```cuda\nint x;\n```\n```python\nprint(1)\n```")
    assert not e.ok and e.blocks_found == 0


def test_two_cpp_blocks_are_an_error():
    e = extract_kernel("```cpp\nint a;\n```\ntext\n```cpp\nint b;\n```")
    assert not e.ok and e.blocks_found == 2
    assert "exactly one" in extraction_feedback(e)


def test_other_language_blocks_do_not_count_and_empty_block_is_ignored():
    text = "```bash\nnvcc x\n```\n```cpp\n```\n```cpp\nint a;\n```"
    e = extract_kernel(text)
    assert e.ok and e.code == "int a;\n"


def test_triton_uses_python_fence():
    e = extract_kernel("```python\nimport triton\n```", Language.TRITON)
    assert e.ok and e.fence == "python"
    assert not extract_kernel("```cpp\nint a;\n```", Language.TRITON).ok
    assert "```python" in extraction_feedback(extract_kernel("no code", "triton"))


def test_fence_with_attributes_and_indented_closing():
    e = extract_kernel("```cpp title=kernel.cu\nint a;\n  ```\n")
    assert e.ok and e.code == "int a;\n"
