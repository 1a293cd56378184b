#!/usr/bin/env python3
"""examples/ddp/train.py's stand-in for the cluster tests whose subject is not torch's training.

torchrun starts it on every node as it starts train.py (the same arguments, the same environment:
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), but it never imports torch: a rank's
import of torch costs about 2.4 CPU-seconds, paid by every rank of every cluster of every case,
while what those cases test is the product's flow around the job (a member's death, attach,
recovery, spend, the watchdog). cluster.train, cluster.torchrun and cluster.threeNodes keep the
real training and its all-reduce.

The ranks still train together: rank 0 listens on MASTER_ADDR at MASTER_PORT + 1 (torchrun's own
store holds MASTER_PORT), every other rank connects to it, and each step is a blocking exchange
between rank 0 and every other rank, as an all-reduce is. A rank whose peer dies fails (the
connection closes) and a rank whose peer freezes waits, as gloo's ranks do; rank 0 cannot run
ahead of a dead node. Rank 0 alone writes the trainer protocol's lines ($OVERBRAINER_METRICS:
begin, log, end), output/checkpoint-<step>/state.json every --save-every steps (built in a hidden
directory, then renamed into place) and output/result.json; a run resumed from a checkpoint
(--resume-from or $OVERBRAINER_RESUME_FROM) goes on from its step, which rank 0 sends the others.
Every rank writes output/rank-<rank>.json with a digest of the steps it took part in.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import time

CONNECT_SECONDS = 300


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--save-every", type=int, default=0)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--out", default="output")
    parser.add_argument("--resume-from", default=os.environ.get("OVERBRAINER_RESUME_FROM") or None)
    parser.add_argument("--metrics", default=os.environ.get("OVERBRAINER_METRICS") or None)
    return parser.parse_args()


def env(name):
    value = os.environ.get(name)
    if not value:
        raise SystemExit("%s is not set: run this under torchrun" % name)
    return value


def write_metrics(path, record):
    if not path:
        return
    line = json.dumps(dict(record, time=time.time()), separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as out:
        out.write(line)
        out.flush()


def send(stream, record):
    stream.write((json.dumps(record) + "\n").encode("utf-8"))
    stream.flush()


def receive(stream, who):
    line = stream.readline()
    if not line:
        raise SystemExit("the connection to %s closed: a rank is gone" % who)
    return json.loads(line)


def connect(addr, port):
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            return socket.create_connection((addr, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def save_checkpoint(out, step):
    final = os.path.join(out, "checkpoint-%d" % step)
    building = os.path.join(out, ".checkpoint-%d.tmp" % step)
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    with open(os.path.join(building, "state.json"), "w", encoding="utf-8") as state:
        json.dump({"step": step}, state)
    os.rename(building, final)


def main():
    args = parse_args()
    rank, world = int(env("RANK")), int(env("WORLD_SIZE"))
    env("LOCAL_RANK")
    addr, port = env("MASTER_ADDR"), int(env("MASTER_PORT")) + 1
    if args.global_batch % world != 0:
        raise SystemExit("--global-batch %d must divide among %d processes" % (args.global_batch, world))

    # The group: rank 0 and one connection to each other rank; rank 0 sends the step to start at
    # and the sum of every rank's rank + 1 (the check train.py's first all-reduce makes).
    peers = []
    if rank == 0:
        server = socket.create_server(("", port))
        while len(peers) < world - 1:
            conn, _ = server.accept()
            stream = conn.makefile("rwb")
            peers.append((receive(stream, "a rank joining")["rank"], conn, stream))
        server.close()
        ranks = sorted(r for r, _, _ in peers)
        assert ranks == list(range(1, world)), "ranks joined: %s" % ranks
        start = 0
        if args.resume_from:
            with open(os.path.join(args.resume_from, "state.json"), encoding="utf-8") as state:
                start = int(json.load(state)["step"])
        total = 1 + sum(r + 1 for r in ranks)
        for _, _, stream in peers:
            send(stream, {"start": start, "sum": total})
    else:
        conn = connect(addr, port)
        conn.settimeout(None)
        stream = conn.makefile("rwb")
        send(stream, {"rank": rank})
        group = receive(stream, "rank 0")
        start, total = int(group["start"]), int(group["sum"])
    assert total == world * (world + 1) // 2, "the group's sum is %s" % total

    os.makedirs(args.out, exist_ok=True)
    if rank == 0:
        write_metrics(args.metrics, {"event": "begin", "max_steps": args.steps})
    took_part = hashlib.sha256()
    loss_value = None
    for step in range(start + 1, args.steps + 1):
        # Each step's exchange: every rank waits for every other, as a step's all-reduce does.
        if rank == 0:
            for r, _, stream in peers:
                got = receive(stream, "rank %d" % r)
                assert got == {"step": step}, "rank %d sent %s at step %d" % (r, got, step)
            for _, _, stream in peers:
                send(stream, {"step": step})
        else:
            send(stream, {"step": step})
            got = receive(stream, "rank 0")
            assert got == {"step": step}, "rank 0 sent %s at step %d" % (got, step)
        took_part.update(b"%d/%d;" % (step, world))
        loss_value = 1.0 / step
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if rank == 0:
            write_metrics(
                args.metrics,
                {"event": "log", "step": step, "max_steps": args.steps, "loss": loss_value},
            )
            if args.save_every > 0 and step % args.save_every == 0:
                save_checkpoint(args.out, step)

    with open(os.path.join(args.out, "rank-%d.json" % rank), "w", encoding="utf-8") as out:
        json.dump({"rank": rank, "world_size": world, "sha256": took_part.hexdigest()}, out)
    if rank == 0:
        with open(os.path.join(args.out, "result.json"), "w", encoding="utf-8") as out:
            json.dump(
                {"steps": args.steps, "started_at": start, "world_size": world, "loss": loss_value},
                out,
            )
        write_metrics(args.metrics, {"event": "end"})
        for _, _, stream in peers:
            send(stream, {"done": True})
    else:
        receive(stream, "rank 0")


if __name__ == "__main__":
    main()
