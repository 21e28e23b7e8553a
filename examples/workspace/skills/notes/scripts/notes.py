"""notes tools: read_todo (read), add_todo (write: proposes, never writes) and sign_note
(sign: asks the core to sign). Speaks the jsonrpc stdio protocol: one tool.invoke request
in, capability requests (ids >= 1) out, one final answer with id 0."""
import base64
import json
import sys

TODO = "notes/todo.md"
_next_id = 1


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def capability(method, params):
    """Asks the core for a capability; returns (result, error)."""
    global _next_id
    request_id = _next_id
    _next_id += 1
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    answer = json.loads(sys.stdin.readline())
    return answer.get("result"), answer.get("error")


def read_todo():
    result, error = capability("readFile", {"path": TODO})
    if error:
        raise ToolFailure(error["code"], "reading %s: %s" % (TODO, error["message"]))
    return result["content"]


class ToolFailure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def run(tool, args):
    if tool == "read_todo":
        return {"file": TODO, "content": read_todo()}
    if tool == "add_todo":
        content = read_todo()
        if content and not content.endswith("\n"):
            content += "\n"
        return {"file": TODO, "content": content + args["item"] + "\n", "written": False}
    if tool == "sign_note":
        data = base64.b64encode(args["text"].encode("utf-8")).decode("ascii")
        result, error = capability("sign", {"type": "message", "data": data})
        if error:
            # -32002: the operator denied the signature or nobody decided in time; the
            # message names the approval.
            raise ToolFailure(error["code"], error["message"])
        return {"text": args["text"], **result}
    raise ToolFailure(-32601, "unknown tool %r" % tool)


def main():
    request = json.loads(sys.stdin.readline())
    params = request["params"]
    try:
        send({"jsonrpc": "2.0", "id": 0, "result": run(params["tool"], params.get("args", {}))})
    except ToolFailure as failure:
        send({"jsonrpc": "2.0", "id": 0, "error": {"code": failure.code, "message": failure.message}})


main()
