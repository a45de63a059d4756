#!/usr/bin/env python3
"""Hostile clients against a running git mirror, all at once, for a fixed time.

Each attack comes from its own loopback addresses (127.0.1.1-254, so that no one peer holds
more connections than --max-connections-per-client lets it) and keeps its number of connections
or requests going until the time is up, opening a new one when the server closes one:

  slowloris   connections that send a header line one byte a second
  idle        connections that never send anything
  trickle     POST bodies of Content-Length 8,000,000 sent at 10 bytes a second
  bombs       gzip bodies of about 60 KiB that inflate to about 60 MiB, back to back
  pipelined   two ref listings sent at once on one connection, both responses read
  rotation    ref listings whose X-Forwarded-For names a new client each time
  debug       /debug/scheduler asked from addresses outside --debug-allow

Prints, per attack, the connections opened and the server's answers by status. Loopback only:
the host must be in 127.0.0.0/8 or ::1. Python 3 standard library only.

  python3 examples/git_mirror/attacks.py --port PORT --repo heavy.git [--duration 60] [--scale 1]
"""
import argparse
import asyncio
import collections
import gzip
import ipaddress
import random
import resource
import sys
import time


def source_addresses():
    return [f"127.0.1.{i}" for i in range(1, 255)]


class Attack:
    def __init__(self, name):
        self.name = name
        self.opened = 0
        self.answers = collections.Counter()
        self.failures = 0


async def connect(args):
    return await asyncio.open_connection(
        args.host, args.port, local_addr=(random.choice(source_addresses()), 0))


async def read_status(reader):
    line = await reader.readline()
    parts = line.split()
    return parts[1].decode() if len(parts) >= 2 else "closed"


async def read_response(reader):
    """Reads one response (Content-Length or chunked) and returns its status."""
    status = await read_status(reader)
    length, chunked = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def keep(attack, deadline, one):
    """Runs `one()` over and over until the deadline; each failure is counted, not raised."""
    while time.monotonic() < deadline:
        try:
            await one()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            attack.failures += 1
            await asyncio.sleep(0.2)


async def drip(args, attack, deadline, head, piece):
    """Sends `head`, then `piece` once a second, until the server answers or closes."""
    async def one():
        reader, writer = await connect(args)
        attack.opened += 1
        writer.write(head)
        try:
            while time.monotonic() < deadline and not reader.at_eof():
                writer.write(piece)
                await writer.drain()
                try:
                    attack.answers[await asyncio.wait_for(read_status(reader), 1)] += 1
                    return
                except asyncio.TimeoutError:
                    pass
        finally:
            writer.close()
    await keep(attack, deadline, one)


async def slowloris(args, attack, deadline):
    await drip(args, attack, deadline,
               f"GET /{args.repo}/info/refs?service=git-upload-pack HTTP/1.1\r\n"
               "Host: x\r\nX-Slow: ".encode(), b"a")


async def idle(args, attack, deadline):
    async def one():
        reader, writer = await connect(args)
        attack.opened += 1
        try:
            data = await asyncio.wait_for(reader.read(1), max(0.1, deadline - time.monotonic()))
            attack.answers["closed" if not data else "data"] += 1
        except asyncio.TimeoutError:
            pass
        finally:
            writer.close()
    await keep(attack, deadline, one)


async def trickle(args, attack, deadline):
    await drip(args, attack, deadline,
               f"POST /{args.repo}/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
               "Content-Type: application/x-git-upload-pack-request\r\n"
               "Content-Length: 8000000\r\n\r\n".encode(), b"0" * 10)


def bomb_body():
    # Valid pkt-lines (a want of an object the mirror does not have), about 60 MiB inflated.
    line = b"0032want " + b"1" * 40 + b"\n"
    return gzip.compress(line * (60 * 1024 * 1024 // len(line)) + b"0000", compresslevel=9)


async def requests(args, attack, deadline, request, responses=1, pause=0.0):
    """Sends `request()` on a new connection, reads `responses` responses (their statuses),
    closes, and again after `pause` seconds."""
    async def one():
        reader, writer = await connect(args)
        attack.opened += 1
        writer.write(request())
        try:
            await writer.drain()
            for _ in range(responses):
                attack.answers[await asyncio.wait_for(read_response(reader), 30)] += 1
        finally:
            writer.close()
        await asyncio.sleep(pause)
    await keep(attack, deadline, one)


async def bombs(args, attack, deadline, body):
    await requests(args, attack, deadline, lambda: (
        f"POST /{args.repo}/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/x-git-upload-pack-request\r\n"
        f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n").encode() + body)


async def pipelined(args, attack, deadline):
    one = (f"GET /{args.repo}/info/refs?service=git-upload-pack HTTP/1.1\r\n"
           "Host: x\r\n\r\n").encode()
    await requests(args, attack, deadline, lambda: one + one, responses=2)


async def rotation(args, attack, deadline):
    await requests(args, attack, deadline, lambda: (
        f"GET /{args.repo}/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n"
        f"X-Forwarded-For: {ipaddress.IPv4Address(random.getrandbits(32))}\r\n"
        "Connection: close\r\n\r\n").encode())


async def debug(args, attack, deadline):
    await requests(args, attack, deadline, lambda:
                   b"GET /debug/scheduler HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   pause=0.1)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--repo", required=True, help="a repository the mirror serves")
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--scale", type=float, default=1, help="multiplies every attack's count")
    args = parser.parse_args()
    if not ipaddress.ip_address(args.host).is_loopback:
        sys.exit("attacks.py: --host must be a loopback address")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    deadline = time.monotonic() + args.duration
    body = bomb_body()
    counts = {"slowloris": 1000, "idle": 3000, "trickle": 200, "bombs": 16, "pipelined": 16,
              "rotation": 16, "debug": 4}
    attacks = {name: Attack(name) for name in counts}
    tasks = []
    for name, count in counts.items():
        for _ in range(max(1, int(count * args.scale))):
            if name == "bombs":
                tasks.append(bombs(args, attacks[name], deadline, body))
            else:
                tasks.append(globals()[name](args, attacks[name], deadline))
    await asyncio.gather(*tasks)
    print(f"bomb body: {len(body)} bytes, inflating to about 60 MiB")
    for name, attack in attacks.items():
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(attack.answers.items()))
        print(f"{name} ({max(1, int(counts[name] * args.scale))} at once): opened {attack.opened},"
              f" answers {{{answers}}}, failures {attack.failures}")


if __name__ == "__main__":
    asyncio.run(main())
