"""Response keys, and the key of a record whose response id another call used."""

from ledger.core.response_keys import another_call, verdict_key

REF_A, REF_B = "a" * 64, "b" * 64


def test_a_verdict_key_names_the_response_and_the_verdict_and_fits_a_key():
    assert verdict_key("ollama:chatcmpl-7", REF_A) == f"ollama:chatcmpl-7:{'a' * 16}"
    long = verdict_key("p:" + "x" * 126, REF_A)
    assert len(long) == 128
    assert long.endswith(f":{'a' * 16}")


def test_only_the_same_path_recording_another_verdict_is_another_call():
    first = {"verdict_ref": REF_A, "recorded_by": "gateway"}
    assert another_call(first, REF_B, "gateway")
    assert not another_call(first, REF_A, "gateway")  # a retry of the same record
    assert not another_call(first, REF_B, "sdk")  # an SDK guard behind the gateway
    assert not another_call(first, None, "gateway")
    assert not another_call(first, REF_B, None)
    assert not another_call({"verdict_ref": None, "recorded_by": "gateway"}, REF_B, "gateway")
