"""Fine-tuning the local proposer model on the archive's best kernels.

- `data`: training data from the archive (sft, dpo, reward), deduplicated by content hash, split into train
  and validation by shape, with a dataset card beside it.
- `reward`: the reward a kernel's evaluation earns (speed ratio, gated on correctness and integrity).
- `train`: TRL + PEFT (LoRA) fine-tunes from a local base model; writes an adapter `--local-adapter` loads.
- `compare`: an adapter's held-out metrics (compile rate, correct rate, speedup of the first candidate).
- `periodic`: the `--finetune-every N` trigger and the cycle it starts in a separate process.
- `cli`: `hgemm finetune export|run|cycle|list`.

Heavy libraries (torch, transformers, trl, peft, datasets) are imported inside the functions that use them.
"""
