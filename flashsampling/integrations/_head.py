"""Which models :func:`~flashsampling.integrations.transformers.generate` may sample: a head that is ``x @ W.T``.

The fused sampler draws from ``softmax(x @ W.T / T)`` with ``x = final_norm(h_L)`` (the backbone's output) and ``W``
the LM-head weight.  That is the model's own law only when nothing else stands between ``x`` and the logits, so
:func:`split_lm_head` refuses, by name, everything that would: a config field that transforms the logits
(:data:`HEAD_FIELDS`), a head bias, a head whose forward is not ``torch.nn.Linear``'s, forward hooks on the head or
the model (or global ones), a forward replaced on the instance (accelerate's offloading hooks among them), a model
on the ``meta`` device or on a device the kernels do not run on.  A family in :data:`SUPPORTED_MODEL_TYPES` had its
head read in transformers' source and is tested; any other opts in with ``verify_head=True``, which checks the head
on a probe input (:func:`check_head_on_probe`: the model's own logits against ``x @ W.T`` within the rounding of
both) and refuses it otherwise.
"""

from __future__ import annotations

import torch
import transformers

from flashsampling._validate import check_device_type, check_flag

from ._decode_step import fp32_logits

#: ``config.model_type`` of the families whose causal-LM head was read in transformers' source and checked by
#: ``tests/test_integrations_transformers.py`` to compute ``logits = final_norm(h) @ W.T`` (nothing after the
#: matmul), with the final norm inside the backbone.
SUPPORTED_MODEL_TYPES = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "phi3", "olmo2"}
)

#: Config fields that change the head's law, with the value that leaves it a plain matmul and what they do.
#: Gemma 2/3 soft-cap (``c * tanh(z / c)``), Cohere multiplies by ``logit_scale``, Granite divides by
#: ``logits_scaling``, Falcon-H1 multiplies by ``lm_head_multiplier`` (transformers' ``modeling_*.py``).
HEAD_FIELDS = (
    ("final_logit_softcapping", None, "soft-caps the logits, c * tanh(z / c)"),
    ("logit_scale", 1.0, "multiplies the logits"),
    ("logits_scaling", 1.0, "divides the logits"),
    ("lm_head_multiplier", 1.0, "multiplies the logits"),
)

_NOT_PLAIN = "flashsampling samples only heads with logits = final_norm(h) @ W.T"
#: Tokens of the probe input (:func:`check_head_on_probe`).
PROBE_LENGTH = 8


def split_lm_head(model, *, verify_head: bool = False) -> tuple[torch.nn.Module, torch.Tensor]:
    """The backbone and LM-head weight of a causal LM whose logits are ``final_norm(h) @ W.T``, after checks.

    The backbone (``model.get_decoder()``) maps token ids to ``x = final_norm(h_L)`` of shape ``[B, L, D]``;
    ``W = model.get_output_embeddings().weight`` has shape ``[V, D]``, and the model's logits are ``x @ W.T``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM of a family in :data:`SUPPORTED_MODEL_TYPES`, or of another family with
        ``verify_head=True``.
    verify_head : bool
        Check the head on a probe input (:func:`check_head_on_probe`) and accept a family outside
        :data:`SUPPORTED_MODEL_TYPES` when it passes.

    Returns
    -------
    (torch.nn.Module, torch.Tensor)
        The backbone and ``W``.

    Raises
    ------
    TypeError
        ``model`` is not a ``transformers.PreTrainedModel``; ``verify_head`` not a bool.
    ValueError
        An encoder-decoder or non-causal model; no LM-head weight; weights on the ``meta`` device or another the
        kernels do not run on; a head that is not a plain matmul (a config field of :data:`HEAD_FIELDS`, a head
        bias, a head class whose forward is not ``torch.nn.Linear``'s, a forward hook on the head or the model or a
        global one, a forward replaced on the instance); a family not in :data:`SUPPORTED_MODEL_TYPES` without
        ``verify_head=True``; a head that fails the probe; a head width other than ``config.hidden_size``.
    """
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"model must be a transformers.PreTrainedModel, got {type(model).__name__}")
    verify_head = check_flag("verify_head", verify_head)
    name = type(model).__name__
    config = model.config
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    configs = {id(config): config, id(text_config): text_config}.values()
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{name} is an encoder-decoder model (config.is_encoder_decoder=True); generate needs a "
            "decoder-only causal LM"
        )
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        raise ValueError(
            f"{name} has no LM-head weight (model.get_output_embeddings() is "
            f"{type(head).__name__}); load the ...ForCausalLM class, not the base model"
        )
    if weight.device.type == "meta":
        raise ValueError(f"{name} is on the meta device (its weights are not loaded): load or materialize it first")
    check_device_type(f"{name}'s LM-head weight.device", weight.device)
    for cfg in configs:
        if getattr(cfg, "use_bidirectional_attention", False):
            raise ValueError(f"{name} is not causal (config.use_bidirectional_attention=True)")
    if not model.can_generate():
        raise ValueError(f"{name} is not a causal language model (model.can_generate() is False)")
    for module_name, module in model.named_modules():
        if getattr(module, "is_causal", True) is False:
            raise ValueError(f"{name} is not causal: module {module_name!r} has is_causal=False")
    for field, neutral, effect in HEAD_FIELDS:
        for cfg in configs:
            value = getattr(cfg, field, None)
            if value is not None and value != neutral:
                raise ValueError(
                    f"{name}'s head is not a plain matmul: config.{field}={value} {effect}, so softmax(x @ W.T / T) "
                    f"is not the model's law; {_NOT_PLAIN}"
                )
    if getattr(head, "bias", None) is not None:
        raise ValueError(
            f"{name}'s head is not a plain matmul: it has a bias (model.get_output_embeddings().bias); {_NOT_PLAIN}"
        )
    _check_plain_forward(name, model, head)
    model_type = getattr(text_config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES and not verify_head:
        raise ValueError(
            f"{name} has config.model_type={model_type!r}, not a family whose head is checked to be "
            f"final_norm(h) @ W.T (supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}); pass verify_head=True to "
            "check this model's head on a probe input and opt in"
        )
    if weight.dim() != 2:
        raise ValueError(f"{name}'s LM-head weight has shape {tuple(weight.shape)}; expected [V, D]")
    hidden_size = getattr(text_config, "hidden_size", None)
    if weight.shape[1] != hidden_size:
        raise ValueError(
            f"{name}'s LM-head weight has D={weight.shape[1]} columns but config.hidden_size="
            f"{hidden_size}; the head must take the backbone's hidden state"
        )
    backbone = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", None)
    if not isinstance(backbone, torch.nn.Module) or backbone is model:
        raise ValueError(f"{name} has no separate backbone (model.get_decoder() returned {type(backbone).__name__})")
    if verify_head:
        check_head_on_probe(model, backbone, weight)
    return backbone, weight


def _check_plain_forward(name: str, model, head) -> None:
    """``ValueError`` when something runs between ``x @ W.T`` and the logits: a head class whose forward is not
    ``torch.nn.Linear``'s, a forward replaced on the head's or the model's instance, forward hooks on either, or
    global forward hooks (``torch.nn.modules.module.register_module_forward_hook``)."""
    if type(head).forward is not torch.nn.Linear.forward:
        raise ValueError(
            f"{name}'s head is not a plain matmul: model.get_output_embeddings() is a {type(head).__name__} whose "
            f"forward is not torch.nn.Linear's; {_NOT_PLAIN}"
        )
    for where, module in (("model.get_output_embeddings()", head), ("the model", model)):
        if "forward" in vars(module):
            raise ValueError(f"{name}: the forward of {where} is replaced on the instance (a wrapper or an offloading "
                             f"hook), so its logits may not be x @ W.T; {_NOT_PLAIN}")  # fmt: skip
        if module._forward_hooks or module._forward_pre_hooks:
            raise ValueError(f"{name}: {where} has forward hooks, which may change its logits; remove them "
                             f"({_NOT_PLAIN})")  # fmt: skip
    hooks = torch.nn.modules.module
    if hooks._global_forward_hooks or hooks._global_forward_pre_hooks:
        raise ValueError(f"global forward hooks are registered (torch.nn.modules.module.register_module_forward_hook), "
                         f"which may change {name}'s logits; {_NOT_PLAIN}")  # fmt: skip


def check_head_on_probe(model, backbone, weight: torch.Tensor) -> None:
    """``ValueError`` unless the model's own last-position logits on a probe input equal ``x @ W.T`` there.

    The probe is ``PROBE_LENGTH`` fixed token ids.  Both sides are compared in fp32: ``z = fl32(x @ W.T)`` and the
    model's logits ``y``; a plain head gives ``|y_v - z_v| <= 2 gamma_D S_v + 4 u |y_v| + u S_v / 4`` with
    ``S = |x| @ |W|.T``, ``gamma_D = D 2**-24 / (1 - D 2**-24)`` (the two fp32 accumulations) and ``u`` the unit
    roundoff of the logits' dtype (their rounding, and a reduced-precision split-K reduction in bf16/fp16).  A
    scaled, soft-capped, biased or otherwise transformed head is off by far more (``tests/test_integrations_
    transformers.py`` plants a 0.9 scale)."""
    vocab = model.get_input_embeddings().num_embeddings
    probe = ((torch.arange(PROBE_LENGTH, device=weight.device) * 7919 + 3) % vocab)[None]
    with torch.no_grad():
        logits = model(input_ids=probe).logits[0, -1]
        y = logits.float()
        x = backbone(input_ids=probe).last_hidden_state[0, -1:]
        z = fp32_logits(x, weight)[0]
        s = fp32_logits(x.abs(), weight.abs())[0]
    if y.shape != z.shape:
        raise ValueError(f"{type(model).__name__}'s logits have {y.shape[-1]} columns but its head has "
                         f"{z.shape[-1]}; {_NOT_PLAIN}")  # fmt: skip
    D = weight.shape[1]
    gamma = D * 2.0**-24 / (1 - D * 2.0**-24)
    u = torch.finfo(logits.dtype).eps / 2
    tol = 2 * gamma * s + 4 * u * y.abs() + u * s / 4
    worst = ((y - z).abs() - tol).argmax()
    if not bool(((y - z).abs() <= tol).all()):
        raise ValueError(
            f"{type(model).__name__}'s head is not a plain final-norm matmul on a probe input: its logit {int(worst)} "
            f"is {float(y[worst]):.6g} but x @ W.T gives {float(z[worst]):.6g} (tolerance {float(tol[worst]):.3g}); "
            f"{_NOT_PLAIN}"
        )
