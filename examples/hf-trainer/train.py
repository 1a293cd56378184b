#!/usr/bin/env python3
"""Fine-tune a small causal language model with the Hugging Face Trainer, reporting
to Overbrainer through its shipped callback.

    python train.py [--model HuggingFaceTB/SmolLM2-135M] [--epochs 3]

Overbrainer copies python/overbrainer_metrics.py into the run directory as
plugin/overbrainer_metrics.py and sets $OVERBRAINER_METRICS; the callback appends
the Trainer's logs (loss, eval_loss, learning_rate, grad_norm) there, and the
run's chart and ETA follow them. Outside a run (no $OVERBRAINER_METRICS) the
callback writes nothing, so the script also runs on its own.

The model and its tokenizer are saved to output/, which Overbrainer retrieves
and checks by SHA-256 before the pod is deleted.

Stop and resume: when Overbrainer asks for a snapshot ($OVERBRAINER_SNAPSHOT:
`train stop`, the cost cap, the deadline, a full disk), the callback has the
Trainer save output/checkpoints/checkpoint-<step> (model, optimizer, scheduler,
random generators, trainer state) at the end of the current step and stop; it
writes snapshot.json, and this script exits 0 without saving a final model. A
run resumed from it gets that checkpoint in $OVERBRAINER_RESUME_FROM, which
goes to trainer.train(resume_from_checkpoint=...): the Trainer continues at the
next step, to the same number of steps.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# In a run: plugin/ next to this file. In this repository: python/ two levels up.
for candidate in (os.path.join(HERE, "plugin"), os.path.join(HERE, "..", "..", "python")):
    if os.path.isfile(os.path.join(candidate, "overbrainer_metrics.py")):
        sys.path.insert(0, candidate)
        break

from overbrainer_metrics import OverbrainerMetricsCallback, resume_checkpoint  # noqa: E402


def read_texts(path):
    with open(path, encoding="utf-8") as source:
        return [json.loads(line)["text"] for line in source if line.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M")
    parser.add_argument("--data", default=os.path.join(HERE, "data"))
    parser.add_argument("--output", default="output")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=256)
    args = parser.parse_args(argv)

    # Imported here so --help works without them installed.
    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        args.model,
        torch_dtype=torch.bfloat16 if torch.cuda.is_available() else torch.float32,
    )

    def tokenize(batch):
        return tokenizer(batch["text"], truncation=True, max_length=args.max_length)

    train = Dataset.from_dict({"text": read_texts(os.path.join(args.data, "train.jsonl"))})
    evaluation = Dataset.from_dict({"text": read_texts(os.path.join(args.data, "eval.jsonl"))})
    train = train.map(tokenize, batched=True, remove_columns=["text"])
    evaluation = evaluation.map(tokenize, batched=True, remove_columns=["text"])

    training_args = TrainingArguments(
        output_dir=os.path.join(args.output, "checkpoints"),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        lr_scheduler_type="cosine",
        warmup_ratio=0.1,
        # Every step logged: the chart gets a point per step and the ETA a fresh pace.
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=10,
        save_strategy="no",
        bf16=torch.cuda.is_available(),
        report_to=[],
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=evaluation,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
        callbacks=[OverbrainerMetricsCallback()],
    )
    # None on a fresh run; a resumed run's checkpoint (saved by the Trainer when it stopped).
    trainer.train(resume_from_checkpoint=resume_checkpoint())
    (metrics,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, OverbrainerMetricsCallback)]
    if metrics.snapshot is not None:
        # Stopped with a snapshot: the checkpoint is what Overbrainer brings home, not a final model.
        print("stopped at step %d; snapshot in %s" % (trainer.state.global_step, metrics.snapshot), flush=True)
        return 0
    trainer.save_model(args.output)
    tokenizer.save_pretrained(args.output)
    print("eval:", trainer.evaluate(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
