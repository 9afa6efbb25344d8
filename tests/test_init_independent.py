"""Every randomly initialized weight is its own draw. Keras 3 seeds an
unseeded initializer once, at construction, so one instance shared by
several weights gave each the same values (query = key = value, the FFN's
two kernels, the SQuAD head's start and end). The original's TF1 draws
are independent; so must ours be, for every objective and the QA head."""

import keras
import numpy as np
import pytest

from finetune.qa.qa_head import SQuADHead
from model.config import get_model_config
from pretrain.objectives import build_model
from tests.tiny_models import SPECIALS
from tests.tiny_models import electra_hparams

PREFIX = 64  # values compared: equal draws agree from the first one


def shared_draws(weights):
  """Pairs of weights (path, path) whose first values are the same."""
  drawn = [(path, np.asarray(v, np.float64).ravel()) for path, v in weights
           if np.asarray(v).size > 1 and np.std(np.asarray(v)) > 0]
  pairs = []
  for i, (path, a) in enumerate(drawn):
    for other, b in drawn[i + 1:]:
      k = min(len(a), len(b), PREFIX)
      if np.array_equal(a[:k], b[:k]):
        pairs.append((path, other))
  return pairs


@pytest.mark.parametrize("objective", ["electra", "mlm", "electric",
                                       "script"])
def test_no_two_pretraining_weights_share_a_draw(objective):
  keras.utils.set_random_seed(3)
  model = build_model(electra_hparams(objective=objective), None, SPECIALS)
  model.build_variables()
  weights = [(v.path, v) for v in model.weights]
  assert len(weights) > 20
  assert not shared_draws(weights)


def test_no_two_squad_head_weights_share_a_draw():
  keras.utils.set_random_seed(3)
  config = get_model_config("tiny", 60, dict(hidden_size=16,
                                            intermediate_size=32))
  head = SQuADHead(config, beam_size=2, v2=True)
  head.build((None, None, 16))
  weights = [(v.path, v) for v in head.weights]
  assert len(weights) >= 5
  assert not shared_draws(weights)


def test_the_check_finds_a_shared_instance():
  init = keras.initializers.TruncatedNormal(stddev=0.02)
  assert shared_draws([("a", init((4, 8))), ("b", init((8, 4)))])
