from ptxcore.agent.context import history_messages, messages_for_call

PAIRS = [("a0", "f0"), ("a1", "f1")]


def test_full_keeps_everything_in_order():
    msgs = messages_for_call("S", "U", PAIRS, "full")
    assert [m["content"] for m in msgs] == ["S", "U", "a0", "f0", "a1", "f1"]
    assert msgs == history_messages("S", "U", PAIRS)


def test_latest_pair_keeps_task_and_last_exchange():
    assert [m["content"] for m in messages_for_call("S", "U", PAIRS, "latest-pair")] == ["S", "U", "a1", "f1"]
    assert [m["content"] for m in messages_for_call("S", "U", [], "latest-pair")] == ["S", "U"]


def test_single_user_joins_without_role_labels():
    msgs = messages_for_call("S", "U", PAIRS, "single-user")
    assert msgs == [{"role": "system", "content": "S"}, {"role": "user", "content": "U\n\na0\n\nf0\n\na1\n\nf1"}]


def test_no_system_message_when_empty():
    assert messages_for_call("", "U", [], "full") == [{"role": "user", "content": "U"}]
