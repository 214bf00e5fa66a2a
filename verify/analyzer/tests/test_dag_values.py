# domains/dag_values.py (the LLVM symbolic values: hash-consed nodes, integers bit by bit, IEEE
# constants) and domains/dag_tables.py (equality up to the AVX-512 decoders' table lookups).
from analyzer.domains import dag_values as dv
from analyzer.domains.dag_tables import same


def _byte(name: str):
    leaf = dv.node("in", name, 0, "i8")
    return dv.BV(tuple(dv.node("bit", i, leaf) for i in range(8)))


def test_hash_consing():
    assert dv.node("in", "X", 0) is dv.node("in", "X", 0)
    assert dv.node("in", "X", 0) is not dv.node("in", "X", 4)


def test_constants_and_folding():
    assert dv._fconst("1.5") is dv._fconst("0x3FF8000000000000")  # decimal or the double's hex
    assert dv._fconst("0.0") is not dv._fconst("-0.0")
    three = dv._fold("add", dv._fconst("1.0"), dv._fconst("2.0"), True)
    assert three is dv._fconst("3.0")
    # 2^24 + 1 is exact in double, rounds to 2^24 in f32
    big = dv._fold("add", dv._fconst(str(2.0 ** 24)), dv._fconst("1.0"), True)
    assert big is dv._fconst(str(2.0 ** 24))
    assert dv._fold_exact("add", dv._fconst(str(2.0 ** 24)), dv._fconst("1.0")) is None  # not an f32 value


def test_integers_bit_by_bit():
    b = _byte("B")
    shifted = dv._bv_op("shl", 8, b, 1)
    assert shifted[0] == 0 and shifted[1] is b[0]
    masked = dv._bv_op("and", 8, b, 0x0F)
    assert masked[4:] == (0, 0, 0, 0) and masked[:4] == b[:4]
    # the same integer computed two ways gives the same bits: (b << 1) >> 1 == b & 0x7F
    assert dv._bv_op("lshr", 8, shifted, 1) == dv._bv_op("and", 8, b, 0x7F)
    assert dv._bv_op("xor", 8, b, b) == 0  # every bit known: an int
    assert dv._bv_op("add", 8, dv._bv_op("and", 8, b, 0), 5) == 5


def test_wrap_and_booleans():
    assert dv._wrap(300, 8) == 44 and dv._wrap(-1, 8) == -1
    assert dv._to_s(255, 8) == -1 and dv._to_u(-1, 8) == 255
    x = dv.node("in", "X", 0)
    assert dv._band(1, x) is x and dv._band(0, x) == 0
    assert dv._bxor(x, x) == 0 and dv._bnot(dv._bnot(x)) is x
    y = dv.node("in", "Y", 0)
    assert dv._bor(x, y) is dv._bor(y, x)  # operands in one order


def test_table_lookup_equals_computed_value():
    b = _byte("Q")
    index = b[:4]  # four input bits pick an entry
    value = dv.node("uitofp", "float", index)  # the decoder's value of those bits
    table = tuple(dv._const_of(float(i), True) for i in range(16))
    assert same(dv.node("perm", index, table), value)
    wrong = table[:3] + (dv._const_of(9.0, True),) + table[4:]
    assert not same(dv.node("perm", index, wrong), value)
    assert same(dv.node("add", value, value), dv.node("add", value, value))
    assert not same(dv.node("add", value, table[1]), dv.node("add", table[1], value))  # outside a table: as written
