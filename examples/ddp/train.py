#!/usr/bin/env python3
"""A small PyTorch DistributedDataParallel training, launched by torchrun on every node.

    torchrun --nnodes=$NUM_NODES --nproc_per_node=$NUM_TRAINERS --node_rank=$NODE_RANK \
        --master_addr=$PRIMARY_ADDR --master_port=$PRIMARY_PORT train.py --steps 40

It fits a linear model to synthetic data (the same on every process, from a fixed seed) with the
gloo backend on CPU, NCCL on GPUs. Each step takes one global batch (its indices drawn from the
step number) split evenly across the processes, so any number of nodes follows the same loss
curve as one process with the same global batch, up to float rounding.

Rank 0 alone reports through Overbrainer's trainer protocol (JSON lines appended to
$OVERBRAINER_METRICS: begin, log, end), saves output/checkpoint-<step>/ every --save-every steps
(built in a hidden directory, then renamed into place) and writes output/model.pt and
output/result.json. A run started with --resume-from (or $OVERBRAINER_RESUME_FROM) set to a
checkpoint continues at the next step: rank 0 loads it, and DistributedDataParallel gives its
parameters to every other process. Every rank writes output/rank-<rank>.json with the SHA-256 of
its final parameters: they are equal when the processes really trained together.
"""

import argparse
import hashlib
import json
import os
import shutil
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES = 8
SAMPLES = 2048


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--save-every", type=int, default=0)
    parser.add_argument(
        "--step-seconds", type=float, default=0.0, help="sleep this long each step (tests: a run long enough to kill)"
    )
    parser.add_argument("--out", default="output")
    parser.add_argument("--resume-from", default=os.environ.get("OVERBRAINER_RESUME_FROM") or None)
    parser.add_argument("--metrics", default=os.environ.get("OVERBRAINER_METRICS") or None)
    return parser.parse_args()


def write_metrics(path, record):
    if not path:
        return
    line = json.dumps(dict(record, time=time.time()), separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as out:
        out.write(line)
        out.flush()


def digest(model):
    hasher = hashlib.sha256()
    for tensor in model.state_dict().values():
        hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return hasher.hexdigest()


def save_checkpoint(out, step, model):
    final = os.path.join(out, "checkpoint-%d" % step)
    building = os.path.join(out, ".checkpoint-%d.tmp" % step)
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    torch.save({"step": step, "model": model.state_dict()}, os.path.join(building, "model.pt"))
    os.rename(building, final)
    return final


def main():
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.global_batch % world != 0:
        raise SystemExit("--global-batch %d must divide among %d processes" % (args.global_batch, world))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")

    # The all-reduce every step relies on: each rank adds its rank + 1.
    check = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(check)
    assert int(check.item()) == world * (world + 1) // 2, "all-reduce gave %s" % check.item()

    data = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=data)
    truth = torch.randn(FEATURES, 1, generator=data)
    y = x @ truth + 0.5 + 0.01 * torch.randn(SAMPLES, 1, generator=data)

    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    start = 0
    if args.resume_from and rank == 0:
        state = torch.load(os.path.join(args.resume_from, "model.pt"))
        model.load_state_dict(state["model"])
        start = int(state["step"])
    # Rank 0's step for everyone; DistributedDataParallel gives rank 0's parameters to all.
    begun = torch.tensor([start], device=device)
    dist.broadcast(begun, 0)
    start = int(begun.item())
    model = model.to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)

    os.makedirs(args.out, exist_ok=True)
    per_rank = args.global_batch // world
    if rank == 0:
        write_metrics(args.metrics, {"event": "begin", "max_steps": args.steps})
    loss_value = None
    for step in range(start + 1, args.steps + 1):
        order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(step))
        mine = order[: args.global_batch][rank * per_rank : (rank + 1) * per_rank]
        loss = torch.nn.functional.mse_loss(ddp(x[mine].to(device)), y[mine].to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        loss_value = mean.item() / world
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if rank == 0:
            write_metrics(
                args.metrics,
                {"event": "log", "step": step, "max_steps": args.steps, "loss": loss_value},
            )
            if args.save_every > 0 and step % args.save_every == 0:
                save_checkpoint(args.out, step, model)

    with open(os.path.join(args.out, "rank-%d.json" % rank), "w", encoding="utf-8") as out:
        json.dump({"rank": rank, "world_size": world, "sha256": digest(model)}, out)
    if rank == 0:
        torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
        with open(os.path.join(args.out, "result.json"), "w", encoding="utf-8") as out:
            json.dump(
                {"steps": args.steps, "started_at": start, "world_size": world, "loss": loss_value},
                out,
            )
        write_metrics(args.metrics, {"event": "end"})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
