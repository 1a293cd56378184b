/**
 * The commented overbrainer.toml the "Create overbrainer.toml" command writes.
 * It is valid as written (a test parses it) once the Axolotl YAML it names
 * exists, and it explains every key the parser knows (a test checks that too).
 */
import { DEFAULT_RUNPOD_IMAGE, DEFAULT_RUNPOD_VENV } from './types';

export function configTemplate(): string {
  return `# overbrainer.toml: how Overbrainer trains this workspace's model.
# Every key below is explained; commented keys show their default.
# Environment variables override the file: OVERBRAINER_<SECTION>__<KEY>, with
# __ between levels, e.g. OVERBRAINER_TARGETS__POD__MAX_HOURS=2.
# The Runpod API key is never written here: set OVERBRAINER_RUNPOD__API_KEY, or
# run "Overbrainer: Set Runpod API Key".

[project]
# Run IDs start with this name (default: the workspace folder's name).
# name = "my-model"

[training]
# The target a run uses unless you pick another: a [targets.NAME] below.
target = "pod"
# How the job starts in the run directory:
#   trainer = "axolotl"  runs \`axolotl train\` on the YAML named by config;
#   trainer = "command"  runs command with sh -c, e.g. command = "python train.py".
trainer = "axolotl"
config = "axolotl.yaml"
# command = "python train.py"
# With launcher = "torchrun" (trainer = "command" only) the command is the
# script and its arguments, started by PyTorch's torchrun on every node of a
# target with nodes = 2 or more, and on one pod a process per GPU,
# e.g. command = "train.py --epochs 3".
# launcher = "torchrun"
# Files and folders of the workspace copied into the run directory (paths
# relative to the workspace, / between folders, never outside it).
upload = []
# What comes back from the run directory once the job ended; a trailing /
# marks a folder. Results are verified by SHA-256 before the pod is deleted.
# artifacts = ["output/", "metrics.jsonl", "job.log"]
# Instead of config, Overbrainer can generate the Axolotl config from these
# keys (as the overbrainer CLI does; "train --dry-run" prints it). It trains on
# data/train.jsonl (chat messages, one per line; upload = ["data"]) and
# evaluates on data/eval.jsonl when uploaded. Defaults shown; config and these
# keys together are an error (your own YAML would win).
# base_model = "Qwen/Qwen2.5-0.5B-Instruct"
# adapter = "lora"            # lora, qlora or full
# epochs = 3
# learning_rate = 2e-4
# lora_r = 16
# lora_alpha = 32
# lora_dropout = 0.05
# sequence_len = 4096
# micro_batch_size = 2
# gradient_accumulation_steps = 4
# optimizer = "adamw_torch_fused"
# lr_scheduler = "cosine"
# sample_packing = true
# evals_per_epoch = 4
# saves_per_epoch = 1
# Any other Axolotl key, deep-merged over the generated config:
# axolotl_extra = { warmup_ratio = 0.1 }
# After training, merge the LoRA into the base model (output/merged/).
# merge = false
# Push the result to the Hugging Face Hub at the job's end (needs
# OVERBRAINER_HF_TOKEN, or "Overbrainer: Set Hugging Face Token").
# hub_model_id = "me/my-model"
# Further secrets the job gets in its environment, read from your environment
# (or VS Code's secret storage); never written to any file.
# secrets = ["WANDB_API_KEY"]

[targets.pod]
# A Runpod GPU pod created for each run, deleted once its results are back.
kind = "runpod"
# GPU type IDs tried in order until one can be placed, or "auto" to try the
# GPU types in stock, cheapest first ("Overbrainer: Pick GPU Types" edits this).
gpu_types = ["NVIDIA A40", "NVIDIA L40S"]
# With gpu_types = "auto" only: least VRAM per GPU (GB), and highest list price
# of one GPU (USD per hour).
# min_vram_gb = 48
# max_price_per_hour = 1.0
# GPUs per pod (per node on a cluster).
# gpu_count = 1
# Nodes: 1 is one pod; 2 or more is one Runpod Instant Cluster of that many
# pods (at most 250; self-serve accounts get 8), the job started on each by
# torchrun (launcher = "torchrun"). max_hours and max_cost_usd hold for the
# whole cluster: max_cost_usd is its total, every node's spend counted.
# nodes = 1
# Required. The pod's watchdog deletes the pod this many hours after it was
# created, whatever it is doing (at most 720). Not applied to a kept pod.
max_hours = 6
# Most a run may spend on its pod, in USD (none by default). Ignored for a
# kept pod.
# max_cost_usd = 20
# When the pod dies while the job runs (Runpod deletes it, the host is lost),
# the run goes on by itself on a new pod from its newest checkpoint brought
# home, this many times at most, within what is left of max_hours and
# max_cost_usd (0 turns it off).
# max_recoveries = 2
# Minutes the watchdog waits for a job to start before deleting the pod (at
# least 5).
# boot_grace_minutes = 30
# Minutes the watchdog keeps a pod whose finished job's results were not
# retrieved (at least 1).
# retrieve_grace_minutes = 60
# Most one retrieval brings home, in GB: a job's results (or a streamed
# checkpoint) over it, or over the free space of this disk, are refused before
# anything is downloaded and the pod keeps them for its retrieve grace.
# max_retrieve_gb = 200
# Container image of the pod, and the virtual environment in it that holds
# bin/axolotl (absolute).
# image = "${DEFAULT_RUNPOD_IMAGE}"
# venv = "${DEFAULT_RUNPOD_VENV}"
# Container disk, in GB (at least 20).
# container_disk_gb = 50
# Data centers the pod may be placed in (any when empty), or "auto" for those
# with a chosen GPU type in stock.
# data_center_ids = ["EU-RO-1"]
# A network volume mounted at /workspace/data; needs exactly one
# data_center_ids entry, the volume's data center.
# network_volume_id = "abc123xyz"
# Largest size (GB) overbrainer may grow that volume to when a run fills it.
# A grow is permanent and billed. Only with network_volume_id.
# max_volume_gb = 200
# Your shells on a pod (Open SSH Terminal, overbrainer runs ssh): "openssh",
# the system ssh (no config file read), or "builtin", Overbrainer's own client.
# ssh_client = "openssh"

# [targets.here]
# # This machine: the same flow without a pod.
# kind = "local"
# # Optional: a virtual environment whose bin/ goes first on the job's PATH.
# venv = "/home/me/axolotl-venv"
# # Jobs of a local target always run natively.
# runtime = "native"

# [targets.box]
# # Your own GPU machine over SSH: the same flow without a pod, nothing deleted
# # there. Its address is read from the environment only:
# #   OVERBRAINER_TARGETS__BOX__HOST=me@gpu-box (or me@gpu-box:2222)
# # Your SSH config, agent and known_hosts are used; an unknown host key is refused.
# kind = "ssh"
# # Where the runs go on the machine (under the SSH user's home, or absolute).
# workdir = "overbrainer"

[budget]
# What this project may spend, all its runs and kept pods together (UTC days
# and months, USD). A run whose worst case would pass what is left is refused
# before any pod is created; each pod's watchdog gets what is left as its cost
# cap, so the budget holds with no client running. None by default.
# max_usd_per_day = 50
# max_usd_per_month = 500
# Give a run that would pass the budget a max_cost_usd that fits instead of
# refusing it.
# fit_runs_to_budget = false
# A kept pod older than this many hours gets one reminder with its spend.
# kept_pod_reminder_hours = 12

# [sweep]
# # An Optuna study: each trial a run of [training] on its own pod, with its
# # parameters; the whole sweep, all its pods together, costs at most budget_usd.
# name = "lr-rank"
# # The runpod target of the trials' pods (training.target when left out).
# target = "pod"
# # The key of metrics.jsonl the study judges each trial by.
# metric = "eval_loss"
# direction = "minimize"
# trials = 24
# # Pods at once.
# parallel = 4
# budget_usd = 15
# # Optuna's sampler: "tpe", "random", "grid" or "cmaes"; and its seed.
# sampler = "tpe"
# sampler_seed = 1
# # Optuna's pruner, which stops a trial early on its intermediate values:
# # "hyperband", "successive_halving", "median" or "none".
# pruner = "hyperband"
# # Hyperband's rungs in the job's steps: its first (the step of the job's first evaluation)
# # and a whole trial's steps; left out, Optuna's (1, and the first trial to end).
# min_resource = 5
# max_resource = 60
#
# [sweep.params]
# # A range (an int range when low and high are integers) or a list of values.
# learning_rate = { low = 1e-5, high = 1e-3, log = true }
# lora_r = [8, 16, 32]
`;
}
