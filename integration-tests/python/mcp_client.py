"""Drives skillbox's MCP server with the official Python client (PyPI `mcp` 2.x).

Usage: mcp_client.py SCENARIO --addr HOST:PORT --token-file FILE [--path /mcp]
                     [--mode auto|legacy] [--stdio WORKSPACE] [--skillbox BIN] [--decision approve|deny]

Prints one JSON object (what the scenario saw) on stdout; the Rust test asserts on it
(integration-tests/tests/suite/mcp.rs). Over --stdio the client starts
`skillbox mcp --workspace WORKSPACE` as its server.
"""

import argparse
import asyncio
import json
from typing import Any

import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--addr", required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--path", default="/mcp")
    p.add_argument("--mode", default="auto")
    p.add_argument("--stdio")
    p.add_argument("--skillbox")
    p.add_argument("--decision", default="approve")
    p.add_argument("--elicit", action="store_true")
    p.add_argument("--bot-token-file")
    return p.parse_args()


ARGS = parse_args()
TOKEN = open(ARGS.token_file).read().strip()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = f"http://{ARGS.addr}"


def client(**kwargs):
    if ARGS.stdio:
        args = ["mcp", "--workspace", ARGS.stdio]
        if ARGS.bot_token_file:
            args += ["--token-file", ARGS.bot_token_file]
        server = StdioServerParameters(command=ARGS.skillbox, args=args)
        return Client(server, mode=ARGS.mode, **kwargs)
    http = httpx2.AsyncClient(headers=AUTH, timeout=httpx2.Timeout(30.0, read=300.0))
    return Client(streamable_http_client(BASE + ARGS.path, http_client=http), mode=ARGS.mode, **kwargs)


def outcome(result):
    return {
        "is_error": result.is_error,
        "structured": result.structured_content,
        "text": [c.text for c in result.content if getattr(c, "type", None) == "text"],
    }


async def refused(coro):
    try:
        await coro
    except MCPError as e:
        return {"code": e.code, "message": e.error.message}
    return None


async def list_call():
    async with client() as c:
        tools = await c.list_tools()
        seen = {
            t.name: {
                "readOnlyHint": t.annotations.read_only_hint,
                "destructiveHint": t.annotations.destructive_hint,
                "openWorldHint": t.annotations.open_world_hint,
                "inputSchema": t.input_schema,
            }
            for t in tools.tools
        }
        echo = await c.call_tool("echo.echo", {"text": "hi from mcp"})
        bad_args = await c.call_tool("files.read", {})
        unknown = await refused(c.call_tool("ghost.run", {}))
        return {
            "protocol_version": c.protocol_version,
            "tools": seen,
            "echo": outcome(echo),
            "bad_args": outcome(bad_args),
            "unknown": unknown,
        }


async def decide_when_pending(decision, call):
    """Polls the REST approvals until one is pending, decides it; its id, and whether the
    MCP call was still waiting when the decision was sent."""
    async with httpx2.AsyncClient(headers=AUTH) as h:
        for _ in range(1200):
            r = await h.get(f"{BASE}/v1/approvals", params={"status": "pending"})
            pending = r.json()["approvals"]
            if pending:
                aid = pending[0]["id"]
                await asyncio.sleep(0.3)
                waiting = not call.done()
                r = await h.post(f"{BASE}/v1/approvals/{aid}", json={"decision": decision})
                assert r.status_code == 200, r.text
                return aid, waiting
            await asyncio.sleep(0.05)
    raise RuntimeError("no pending approval appeared")


async def approval():
    links = []
    decided = []

    async def on_elicit(ctx, params):
        links.append({"mode": params.mode, "url": params.url, "message": params.message})
        aid = params.url.rsplit("/", 1)[1]
        async with httpx2.AsyncClient(headers=AUTH) as h:
            r = await h.post(f"{BASE}/v1/approvals/{aid}", json={"decision": ARGS.decision})
            assert r.status_code == 200, r.text
        decided.append(aid)
        return types.ElicitResult(action="accept")

    kwargs = {"elicitation_callback": on_elicit} if ARGS.elicit else {}
    async with client(**kwargs) as c:
        call = asyncio.create_task(c.call_tool("signer.write_note", {"text": "from mcp"}))
        waiting_when_decided = None
        if not ARGS.elicit:
            aid, waiting_when_decided = await decide_when_pending(ARGS.decision, call)
            decided.append(aid)
        result = await call
        return {
            "protocol_version": c.protocol_version,
            "result": outcome(result),
            "meta": result.meta,
            "links": links,
            "decided": decided,
            "waiting_when_decided": waiting_when_decided,
        }


async def context():
    async with client() as c:
        tools = await c.list_tools()
        inside = await c.call_tool("echo.echo", {"text": "in context"})
        outside = await c.call_tool("word-count.count", {"text": "a b"})
        return {
            "tools": sorted(t.name for t in tools.tools),
            "inside": outcome(inside),
            "outside": outcome(outside),
        }


ANY = TypeAdapter(dict)
# A request of a method the SDK has no type for (the SEP-2640 skills extension).
RawRequest = types.Request[dict[str, Any], str]


async def skills():
    async with client() as c:
        listed = await c.session.send_request(RawRequest(method="skills/list", params={}), ANY)
        got = {}
        for s in listed["skills"]:
            r = await c.session.send_request(
                RawRequest(method="skills/get", params={"uri": s["uri"]}), ANY
            )
            got[s["uri"]] = r["skill"]
        unknown = await refused(
            c.session.send_request(
                RawRequest(method="skills/get", params={"uri": "skill://ghost/SKILL.md"}), ANY
            )
        )
        resources = await c.list_resources()
        texts = {}
        for r in resources.resources:
            read = await c.read_resource(r.uri)
            texts[str(r.uri)] = read.contents[0].text
        return {
            "protocol_version": c.protocol_version,
            "capabilities": c.server_capabilities.model_dump(by_alias=True, exclude_none=True),
            "list": listed["skills"],
            "get": got,
            "unknown": unknown,
            "resources": texts,
        }


async def output_schema():
    async with client() as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        # The client checks structuredContent against the listed outputSchema.
        result = await c.call_tool("shaped.write_note", {"text": "shaped"})
        return {
            "output_schema": tools["shaped.write_note"].output_schema,
            "echo_output_schema": tools["echo.echo"].output_schema,
            "result": outcome(result),
        }


async def bot_scope():
    """Over `skillbox mcp --token-file BOT`: what a bot limited to some skills sees."""
    async with client() as c:
        tools = await c.list_tools()
        echo = await c.call_tool("echo.echo", {"text": "from a bot"})
        other = await refused(c.call_tool("signer.write_note", {"text": "x"}))
        return {
            "tools": sorted(t.name for t in tools.tools),
            "echo": outcome(echo),
            "other": other,
        }


async def main():
    scenario = {
        "bot_scope": bot_scope,
        "list_call": list_call,
        "approval": approval,
        "context": context,
        "skills": skills,
        "output_schema": output_schema,
    }[
        ARGS.scenario
    ]
    out = await scenario()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    asyncio.run(main())
