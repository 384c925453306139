"""``set_optimizer_grouped_parameters`` with a plain list of parameters (what
PaddleFormers' CLI workflows call, to say what trains): PaddleFormers' own
``Trainer`` keeps its bias/norm rule for weight decay then, and so does
``LLRDTrainer`` (PaddleNLP's Trainer drops the rule for any grouped
parameters; its integration follows PaddleNLP)."""
from __future__ import annotations

from paddleformers.trainer import Trainer, TrainingArguments
from support import TokenDataset, make_llama

from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments


def excluded_by_name(structured_name: str) -> bool:
    """PaddleFormers' rule, written out: no weight decay for names with "bias" or "norm"."""
    return "bias" in structured_name or "norm" in structured_name


def test_a_plain_parameter_list_keeps_the_bias_norm_rule(tmp_path):
    decided = {}
    for name, (trainer_class, arguments_class) in {"paddleformers": (Trainer, TrainingArguments),
                                                   "llrd": (LLRDTrainer, LLRDTrainingArguments)}.items():
        model = make_llama()
        args = arguments_class(output_dir=str(tmp_path / name), weight_decay=0.1, max_steps=2, report_to="none",
                               amp_master_grad=False,  # PaddleFormers refuses its default True without AMP
                               save_checkpoint_format="unified_checkpoint", load_checkpoint_format="unified_checkpoint")
        trainer = trainer_class(model=model, args=args, train_dataset=TokenDataset())
        trainer.set_optimizer_grouped_parameters([param for param in model.parameters() if not param.stop_gradient])
        trainer.create_optimizer_and_scheduler(num_training_steps=2)
        decay = trainer.optimizer._apply_decay_param_fun
        decided[name] = {structured: decay(param.name) for structured, param in model.named_parameters()}
        assert decided[name] == {structured: not excluded_by_name(structured) for structured in decided[name]}
    assert any(not decays for decays in decided["llrd"].values())  # norms are in the model, and kept out
