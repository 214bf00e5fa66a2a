# domains/intervals.py: the integer interval domain.
from analyzer.domains import intervals as iv


def test_type_range_and_int_type():
    assert iv.type_range("s", 8) == (-128, 127)
    assert iv.type_range("u", 16) == (0, 65535)
    assert iv.type_range("b", 8) == (-128, 255)  # untyped bits: either reading
    assert iv.int_type("u32") == ("u", 32)
    assert iv.int_type("f32") is None


def test_fit_wraps_or_gives_up():
    assert iv.fit((250, 260), ("u", 8)) is None  # straddles the wrap
    assert iv.fit((256, 260), ("u", 8)) == (0, 4)  # wholly one period above
    assert iv.fit((-3, -1), ("u", 8)) == (253, 255)
    assert iv.fit((-3, -1), ("b", 8)) == (-3, -1)  # b: the signed reading holds it
    assert iv.fit(None, ("u", 8)) is None


def test_parse_imm():
    assert iv.parse_imm("0x10") == 16
    assert iv.parse_imm("-7") == -7
    assert iv.parse_imm("12U") == 12
    assert iv.parse_imm("%r1") is None


def test_decide_comparisons():
    assert iv.decide("lt", (0, 3), (4, 9)) == (1, 1)
    assert iv.decide("lt", (4, 9), (0, 4)) == (0, 0)
    assert iv.decide("lt", (0, 5), (3, 4)) == (0, 1)
    assert iv.decide("lo", (0, 3), (4, 4)) == (1, 1)  # unsigned forms as the signed ones
    assert iv.decide("eq", (2, 2), (2, 2)) == (1, 1)
    assert iv.decide("ne", (0, 1), (5, 6)) == (1, 1)
    assert iv.NEGATE["ge"] == "lt" and iv.NEGATE["hs"] == "lo"


def test_arithmetic_helpers():
    assert iv.mul_iv((-2, 3), (4, 5)) == (-10, 15)
    assert iv.tdiv(-7, 2) == -3  # truncates toward zero, as PTX div
    assert iv.bits_cover(5) == 7
    assert iv.bits_cover(0) == 0


def test_join_and_widen():
    a = {"%r1": (0, 3), "%r2": (5, 5), ("#m", "%r3"): 0b0011, "%r4": (1, 1)}
    b = {"%r1": (2, 9), "%r2": (5, 5), ("#m", "%r3"): 0b0100}
    j = iv.join(a, b)
    assert j == {"%r1": (0, 9), "%r2": (5, 5), ("#m", "%r3"): 0b0111}  # %r4 absent from b: any value
    assert iv.join(None, b) == b and iv.join(None, b) is not b
    # widening: bounds that grew jump to the function's constants, then to nothing (any value)
    w = iv.widen({"%r1": (0, 3)}, {"%r1": (0, 5)}, [0, 1, 8, 64], full=False)
    assert w == {"%r1": (0, 8)}
    assert iv.widen({"%r1": (0, 3)}, {"%r1": (0, 65)}, [0, 1, 8, 64], full=False) == {}
    assert iv.widen({"%r1": (0, 3)}, {"%r1": (0, 5)}, [0, 8], full=True) == {}
    assert iv.widen({"%r1": (0, 3)}, {"%r1": (0, 3)}, [0, 8], full=True) == {"%r1": (0, 3)}
