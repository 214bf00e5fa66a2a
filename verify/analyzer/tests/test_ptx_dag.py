# domains/ptx_dag.py: the values of the PTX symbolic execution and its normalisations.
import struct

import pytest

from analyzer.domains.ptx_dag import (FLT_MIN, Bytes, Dag, ExecError, Node, bf16_halves, bytes_of_value, half,
                                      register_of, value_of_bytes)


def f32(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def leaf(i: int, width: int = 4) -> Node:
    return Node(("leaf", "x", 0, i), width)


def test_folding_only_on_constants():
    d = Dag()
    one, two = d.const(f32(1.0), 4), d.const(f32(2.0), 4)
    assert d.f32_op("add", one, two) is d.const(f32(3.0), 4)
    x = leaf(0)
    zero = d.const(0, 4)
    assert d.f32_op("add", x, zero) is not x  # x + 0.0 is not x (x may be -0.0)
    assert d.op("neg.f32", 4, one) is d.const(f32(-1.0), 4)


def test_commutative_normalisation():
    a, b = leaf(0), leaf(1)
    plain, comm = Dag(), Dag(commutative=True)
    assert plain.f32_op("add", a, b) is not plain.f32_op("add", b, a)
    assert comm.f32_op("add", a, b) is comm.f32_op("add", b, a)
    assert comm.f32_op("sub", a, b) is not comm.f32_op("sub", b, a)
    c = leaf(2)
    assert comm.op("fma.rn.f32", 4, a, b, c) is comm.op("fma.rn.f32", 4, b, a, c)


def test_maximum_is_of_a_set():
    d = Dag()
    a, b, c = leaf(0), leaf(1), leaf(2)
    assert d.maximum("max.f32", d.maximum("max.f32", a, b), c) is d.maximum("max.f32", a, d.maximum("max.f32", c, b))
    assert d.maximum("max.f32", a, a) is a


def test_predicates():
    d = Dag()
    a, b = leaf(0), leaf(1)
    assert d.compare("lt", d.const(f32(1.0), 4), d.const(f32(2.0), 4)) == 1
    assert d.compare("gt", a, b) is d.compare("lt", b, a)
    assert d.negate(d.negate(d.compare("eq", a, b))) is d.compare("eq", a, b)
    p = d.compare("lt", a, b)
    assert d.both([1, p]) is p and d.both([0, p]) == 0 and d.either([1, p]) == 1
    assert d.select(1, a, b) is a and d.select(p, a, a) is a
    assert d.select(p, a, b).key == ("select", p, a, b)
    with pytest.raises(ExecError):
        d.compare("num", a, b)


def test_divide_row_quotient():
    d = Dag()
    x, l = leaf(0), leaf(1)
    div = d.op("div.rn.f32", 4, x, l)
    q = d.op("cvt.rn.f32.f64", 4, d.op("mul.rn.f64", 8, d.op("cvt.f64.f32", 8, x),
                                         d.op("rcp.rn.f64", 8, d.op("cvt.f64.f32", 8, l))))
    small = d.compare("lt", d.op("abs.f32", 4, q), d.const(FLT_MIN, 4))
    nonzero = d.negate(d.compare("eq", x, d.const(0, 4)))
    assert d.select(d.both([nonzero, small]), div, q) is div  # the f64 product is div where the test fails
    other = d.compare("lt", x, l)
    assert d.select(other, div, q) is not div


def test_bytes():
    d = Dag()
    x = leaf(0)
    assert value_of_bytes(bytes_of_value(x, 4), "f32", d) is x
    assert value_of_bytes([1, 0, 0, 0], "int", d) == 1
    assert value_of_bytes(list(struct.pack("<f", 2.0)), "f32", d) is d.const(f32(2.0), 4)
    h0, h1 = leaf(1, 2), leaf(2, 2)
    reg = register_of((h0, 0), (h0, 1), (h1, 0), (h1, 1), d)
    assert isinstance(reg, Bytes) and bf16_halves(reg, d) == (h0, h1)
    assert register_of(1, 2, 3, 4, d) == 0x04030201
    assert half(0x80, 0x3F, d) is d.const(0x3F80, 2)
    with pytest.raises(TypeError):
        value_of_bytes([(h0, 0), (h0, 1), (h1, 0), (h1, 1)], "f32", d)  # two values are no f32
