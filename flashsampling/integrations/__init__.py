"""Integrations of the fused sampler with other libraries (optional dependencies, imported on demand).

Modules
-------
flashsampling.integrations.transformers
    ``generate(model, input_ids, ...)``: a KV-cached decode loop for Hugging Face decoder-only models whose
    logits are ``final_norm(h) @ W.T`` (Llama, Mistral, Qwen2/3 families), sampling every token with
    :func:`flashsampling.sample` so that the logits are never written.  Needs ``pip install
    flashsampling[integrations]``.

The ``torch.library`` custom ops (``torch.ops.flashsampling.sample`` and ``sample_from_logits``, traceable
by ``torch.compile``) live in :mod:`flashsampling.ops`.  Usage: ``docs/integration.md``.
"""
