"""How each server ends a 200 stream with an error (the tail after its token events), and the
message loadgen must report: shared by the parser's unit tests and the end-to-end ones."""

from __future__ import annotations

DONE = b"data: [DONE]\n\n"
# vLLM 0.33 (create_streaming_error_response: json.dumps, so with spaces) and SGLang (the same
# shape with "object": "error" inside) send the error, then [DONE].
VLLM_ERROR = (
    b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
    b'"param": null, "code": 500}}\n\n'
)
SGLANG_ERROR = (
    b'data: {"error": {"object": "error", "message": "Request aborted", "type": '
    b'"BadRequestError", "param": null, "code": 400}}\n\n'
)
# llama.cpp today: format_oai_sse({"error": ...}), and the stream stops without [DONE].
LLAMACPP_ERROR = b'data: {"error":{"code":500,"message":"slot died","type":"server_error"}}\n\n'
# Older llama.cpp builds: an "error:" SSE field, then [DONE].
LLAMACPP_FIELD = b'error: {"code":500,"message":"slot died","type":"server_error"}\n\n'
# TGI: data: without a space.
TGI_ERROR = b'data:{"error":"Request failed during generation: overloaded","error_type":"x"}\n\n'

# server -> (what follows its token events, the server's message)
ERROR_TAILS: dict[str, tuple[bytes, str]] = {
    "vllm": (VLLM_ERROR + DONE, "Internal server error"),
    "sglang": (SGLANG_ERROR + DONE, "Request aborted"),
    "llamacpp": (LLAMACPP_ERROR, "slot died"),
    "llamacpp-field": (LLAMACPP_FIELD + DONE, "slot died"),
    "tgi": (TGI_ERROR + b"data:[DONE]\n\n", "Request failed during generation: overloaded"),
    "flat": (b'data: {"object":"error","message":"flat","code":400}\n\n' + DONE, "flat"),
}
