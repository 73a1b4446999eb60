"""The matcher, without cuDNN or a GPU: which matmuls zyx-cudnn claims, with which shapes,
strides, dtypes and epilogues, and what it refuses and why (``zyx.sched.cudnn``).

Graphs are recorded on the host device: the matcher reads only their structure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.dtypes import DType
from zyx.graph.claims import Claim
from zyx.graph.schedule import Graph
from zyx.hookspecs import hookimpl
from zyx.plugins import registry
from zyx_cudnn.match import Candidate, candidates
from zyx_cudnn.spec import OUTPUT, Layout, Scalar, Step

pytestmark = pytest.mark.cudnn

HOST = "host"


def array(shape: tuple[int, ...], dtype: Any = zyx.float32, seed: int = 0) -> zyx.Tensor:
    data = np.random.default_rng(seed).standard_normal(shape)
    return zyx.asarray(data, dtype=dtype, device=HOST)


def offered(*results: zyx.Tensor, tf32: bool = False) -> list[list[Candidate]]:
    graph = Graph([r.node for r in results])
    return candidates(graph, zyx.device(HOST), tf32)


def claim(result: zyx.Tensor, **options: Any) -> Candidate:
    """The longest claim of the one matmul under ``result``."""
    (found,) = offered(result, **options)
    return found[0]


def steps(c: Candidate) -> list[str]:
    return [s.op for s in c.spec.steps]


def test_a_2d_matmul_is_claimed_with_its_operands_in_place() -> None:
    x, y = array((64, 32)), array((32, 16))
    c = claim(x @ y)
    assert c.output is (x @ y).node or c.output.shape == (64, 16)
    assert c.inputs == (x.node, y.node)
    assert c.spec.a == Layout((1, 64, 32), (2048, 32, 1), 0, DType.F32, 0)
    assert c.spec.b == Layout((1, 32, 16), (512, 16, 1), 0, DType.F32, 1)
    assert c.spec.out == Layout((1, 64, 16), (1024, 16, 1), 0, DType.F32, OUTPUT)
    assert c.spec.steps == () and not c.spec.tf32


def test_the_claim_ends_at_the_view_that_drops_the_reduced_dim() -> None:
    """Claiming the (64, 16) view rather than the (64, 16, 1) sum saves a copy kernel; the
    sum alone is offered only where the view is not its one reader."""
    x, y = array((64, 32)), array((32, 16))
    product = x @ y
    (options,) = offered(product)
    assert [c.output.shape for c in options] == [(64, 16)]
    assert options[0].output is product.node


def test_transposed_operands_are_read_through_their_strides() -> None:
    xt, yt = array((32, 64)), array((16, 32))  # stored transposed
    c = claim(xt.mT @ yt.mT)
    assert c.inputs == (xt.node, yt.node)  # the stored buffers: no copy
    assert c.spec.a == Layout((1, 64, 32), (2048, 1, 64), 0, DType.F32, 0)
    assert c.spec.b == Layout((1, 32, 16), (512, 1, 32), 0, DType.F32, 1)


def test_a_matrix_times_its_own_transpose_reads_one_buffer() -> None:
    x = array((48, 24))
    c = claim(x @ x.mT)
    assert c.inputs == (x.node,)
    assert c.spec.a.source == c.spec.b.source == 0
    assert c.spec.b.strides == (1152, 1, 24)


@pytest.mark.parametrize(
    ("left", "right", "a", "b"),
    [
        ((8, 64, 32), (8, 32, 16), ((8, 64, 32), (2048, 32, 1)), ((8, 32, 16), (512, 16, 1))),
        # The weights broadcast over the batch: a batch of 1 to cuDNN.
        ((8, 64, 32), (32, 16), ((8, 64, 32), (2048, 32, 1)), ((1, 32, 16), (512, 16, 1))),
        ((64, 32), (8, 32, 16), ((1, 64, 32), (2048, 32, 1)), ((8, 32, 16), (512, 16, 1))),
        # Two batch dims of one buffer merge into one.
        ((2, 3, 64, 32), (32, 16), ((6, 64, 32), (2048, 32, 1)), ((1, 32, 16), (512, 16, 1))),
    ],
)
def test_batched_matmuls_have_one_batch_dim(
    left: tuple[int, ...], right: tuple[int, ...], a: Any, b: Any
) -> None:
    c = claim(array(left) @ array(right))
    assert (c.spec.a.dims, c.spec.a.strides) == a
    assert (c.spec.b.dims, c.spec.b.strides) == b
    batch = max(a[0][0], b[0][0])
    assert c.spec.out.dims == (batch, 64, 16)


def test_a_slice_aligned_to_16_bytes_is_read_at_its_offset() -> None:
    x, y = array((64, 40)), array((32, 16))
    c = claim(x[:, 4:36] @ y)  # 4 f32 = 16 bytes in
    assert c.spec.a == Layout((1, 64, 32), (63 * 40 + 32, 40, 1), 4, DType.F32, 0)
    assert c.inputs[0] is x.node


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: array((64, 40))[:, 1:33] @ array((32, 16)), "not 16-aligned"),
        (lambda: zyx.flip(array((64, 32)), axis=1) @ array((32, 16)), "negative stride"),
        (lambda: array((64, 64))[:, ::2] @ array((32, 16)), "neither its rows nor its columns"),
        (
            lambda: zyx.permute_dims(array((3, 2, 64, 32)), (1, 0, 2, 3)) @ array((32, 16)),
            "batch dims do not merge",
        ),
        (lambda: array((64, 32), zyx.float64) @ array((32, 16), zyx.float64), "f64"),
        (lambda: array((64, 32), zyx.int32) @ array((32, 16), zyx.int32), "i32"),
    ],
)
def test_what_cudnn_cannot_read_is_refused_with_the_reason(
    make: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="zyx.sched.cudnn"):
        assert offered(make()) == []
    assert reason in caplog.text, caplog.text


@pytest.mark.parametrize("dtype", [zyx.float16, zyx.bfloat16, zyx.float32])
def test_f16_bf16_and_f32_are_claimed(dtype: Any) -> None:
    c = claim(array((64, 32), dtype) @ array((32, 16), dtype))
    want = {zyx.float16: DType.F16, zyx.bfloat16: DType.BF16, zyx.float32: DType.F32}[dtype]
    assert c.spec.a.dtype is c.spec.b.dtype is c.spec.out.dtype is want


def test_tf32_only_where_allowed_and_only_for_f32() -> None:
    f32 = array((64, 32)) @ array((32, 16))
    assert not claim(f32).spec.tf32 and claim(f32, tf32=True).spec.tf32
    bf16 = array((64, 32), zyx.bfloat16) @ array((32, 16), zyx.bfloat16)
    assert not claim(bf16, tf32=True).spec.tf32


def test_a_bias_add_is_fused_with_the_bias_broadcast() -> None:
    x, y, bias = array((64, 32)), array((32, 16)), array((16,))
    c = claim(x @ y + bias)
    assert c.inputs == (x.node, y.node, bias.node)
    assert c.spec.operands == (Layout((1, 1, 16), (16, 16, 1), 0, DType.F32, 2),)
    assert c.spec.steps == (Step("add", (("value", 0), ("operand", 0)), DType.F32),)


def test_a_column_bias_and_a_full_residual() -> None:
    x, y, column, residual = array((64, 32)), array((32, 16)), array((64, 1)), array((64, 16))
    c = claim((x @ y + column) * residual)
    assert c.spec.operands == (
        Layout((1, 64, 1), (64, 1, 1), 0, DType.F32, 2),
        Layout((1, 64, 16), (1024, 16, 1), 0, DType.F32, 3),
    )
    assert steps(c) == ["add", "mul"]


def test_a_scale_by_a_python_number_is_passed_by_value() -> None:
    """A number's value is not part of the graph's structure (the same plan runs for 2.0
    and 3.0), so it is an input of the claim, passed at each launch."""
    x, y = array((64, 32)), array((32, 16))
    result = (x @ y) * 2.0
    c = claim(result)
    (scale,) = c.spec.operands
    assert scale == Scalar(DType.F32, source=2)
    assert c.inputs[2].op.value == "scalar" and c.inputs[2].arg == 2.0
    assert claim((x @ y) * 3.0).spec == c.spec  # the same key: the same plan


def test_relu_is_cudnns_relu() -> None:
    """``maximum(x, 0)`` is NaN where ``x`` is (the standard), as cuDNN's relu is: the
    front end records where(x != x, x, max(x, 0)) (0 is a constant, never NaN), and the
    spec holds one relu, no comparison, max or operand."""
    x, y = array((64, 32)), array((32, 16))
    c = claim(zyx.maximum(x @ y, 0.0))
    assert steps(c) == ["relu"] and c.spec.operands == ()
    assert c.spec.steps[0].args == (("value", 0),)
    assert steps(claim(zyx.maximum(0.0, x @ y))) == ["relu"]


def test_a_maximum_of_any_other_number_keeps_the_standards_nan_rule() -> None:
    """``maximum(x, s)`` propagates NaN from either side: a max inside two guards. The
    product's guard is a comparison and a select; the number's is ``y - nan_or_zero(s)``."""
    x, y = array((64, 32)), array((32, 16))
    c = claim(zyx.maximum(x @ y, 0.5))
    assert steps(c) == ["cmp_neq", "max", "sub", "binary_select"]
    assert c.spec.operands == (Scalar(DType.F32, source=2), Scalar(DType.F32, source=2, nan=True))
    select = c.spec.steps[-1]
    assert select.args == (("value", 0), ("value", 3), ("value", 1))  # mask ? x : max


def gelu(x: zyx.Tensor) -> zyx.Tensor:
    """The tanh approximation, as a user writes it with the standard's functions."""
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + zyx.tanh(inner))


@pytest.mark.parametrize(
    ("epilogue", "ops"),
    [
        (zyx.tanh, ["tanh"]),
        (lambda v: 1.0 / (1.0 + zyx.exp(-v)), ["neg", "exp", "add", "reciprocal", "mul"]),
        (gelu, ["mul", "mul", "mul", "mul", "add", "mul", "tanh", "add", "mul"]),
        (lambda v: 2.0 - v, ["neg", "add"]),
        (lambda v: v / 4.0, ["div"]),
    ],
)
def test_activations_are_translated_op_by_op(epilogue: Any, ops: list[str]) -> None:
    c = claim(epilogue(array((64, 32)) @ array((32, 16))))
    assert steps(c) == ops


def test_every_shorter_epilogue_is_offered_after_the_longest() -> None:
    """cuDNN decides at build time which it runs; a cut never leaves a bool or the
    middle of the NaN guards as the output."""
    x, y, bias = array((64, 32)), array((32, 16)), array((16,))
    (options,) = offered(zyx.maximum(x @ y + bias, 0.0) * 0.5)
    assert [steps(c) for c in options] == [
        ["add", "relu", "mul"],
        ["add", "relu"],
        ["add"],
        [],
    ]
    assert [len(c.inputs) for c in options] == [4, 3, 3, 2]


def test_a_value_read_outside_the_epilogue_ends_it(caplog: pytest.LogCaptureFixture) -> None:
    x, y, bias = array((64, 32)), array((32, 16)), array((16,))
    product = x @ y
    biased = product + bias
    (options,) = offered(zyx.tanh(biased), biased)  # biased is a result too
    assert [steps(c) for c in options] == [["add"], []]
    (options,) = offered(zyx.tanh(biased), product.sum())  # another reader of the product
    assert [steps(c) for c in options] == [[]]


@pytest.mark.parametrize(
    ("epilogue", "reason"),
    [
        (lambda v: zyx.sum(v, axis=1), "not the product's"),
        (lambda v: zyx.log2(v), "no pointwise log2"),
        (lambda v: v.astype(zyx.int32), "a cast from f32 to i32"),
        (lambda v: v + zyx.flip(array((64, 16)), axis=0), "negative stride"),
        (lambda v: zyx.where(array((64, 16)) > 0, v, 0.0), "mask is not computed"),
    ],
)
def test_the_epilogue_ends_where_cudnn_has_no_op(
    epilogue: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="zyx.sched.cudnn"):
        c = claim(epilogue(array((64, 32)) @ array((32, 16))))
    assert c.spec.steps == ()
    assert "epilogue of matmul" in caplog.text and reason in caplog.text, caplog.text


def test_a_cast_between_floats_passes_through_in_f32() -> None:
    x, y = array((64, 32), zyx.bfloat16), array((32, 16), zyx.bfloat16)
    c = claim(zyx.tanh((x @ y).astype(zyx.float32)))
    assert steps(c) == ["tanh"] and c.spec.out.dtype is DType.F32 and c.spec.dtype is DType.BF16


class Offerer:
    """A plugin that offers each longest candidate as a claim whose launches fail: zyx
    validates it, races it (its launches are asked for, and raise) and the generated
    kernels run."""

    def __init__(self) -> None:
        self.raced: list[Any] = []

    @hookimpl
    def zyx_match_graph(self, graph: Graph, device: Any) -> list[Claim]:
        found = candidates(graph, device)
        return [Claim(c[0].output, c[0].inputs, c[0].spec, self.fail) for c in found]

    def fail(self, device: Any) -> list[Any]:
        self.raced.append(device)
        raise RuntimeError("no cuDNN here")


@pytest.fixture
def offerer() -> Any:
    manager = registry().plugin_manager
    plugin = Offerer()
    manager.register(plugin, name="cudnn-candidates")
    yield plugin
    manager.unregister(plugin)


def test_candidates_are_valid_claims(offerer: Offerer, caplog: pytest.LogCaptureFixture) -> None:
    """zyx's own checks of a claim (its inputs cover everything its subgraph reads) pass
    for the longest candidate, numbers and broadcast operands included, and a number
    reaches the claim's launches as itself."""
    x, y, bias = array((24, 20), seed=1), array((20, 12), seed=2), array((12,), seed=3)
    result = zyx.maximum(x @ y + bias, 0.0) * 2.0 + x[:, :12]
    with caplog.at_level("WARNING", logger="zyx.sched"):
        got = result.numpy()
    assert len(offerer.raced) == 1
    assert "no cuDNN here" in caplog.text and "not among its inputs" not in caplog.text
    a, b, c = (np.asarray(t.numpy(), np.float64) for t in (x, y, bias))
    want = np.maximum(a @ b + c, 0) * 2.0 + a[:, :12]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
