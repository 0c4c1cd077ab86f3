"""SPEC EX3 (and EX6/EX7, which share it): the CEL environment — CEL's macros and string
functions, Kubernetes' libraries, compile and run-time errors as cel-go words them."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from skiff.api.cel import CelCompileError, CelEvalError, compile_expression, evaluate, references


def _eval(expr: str, **activation: Any) -> Any:
    return evaluate(compile_expression(expr, variables=list(activation) or ["self"]),
                    activation)


@pytest.mark.parametrize(("expr", "expected"), [
    ("self.items.all(x, x.size() < 10)", True),
    ("self.items.exists(x, x == 'bb')", True),
    ("self.items.exists_one(x, x.startsWith('b'))", True),
    ("self.items.map(x, x.size())", [1, 2, 3]),
    ("self.items.filter(x, x.size() > 1)", ["bb", "ccc"]),
    ("has(self.name) && !has(self.nope)", True),
    ("self.name.matches('^[a-z-]+$') && self.name.contains('-')", True),
    ("self.name.lowerAscii() + self.name.upperAscii()", "web-aWEB-A"),
    ("self.name.split('-')", ["web", "a"]),
    ("self.items.join(',')", "a,bb,ccc"),
    ("int('12') + 1 == 13 && string(3) == '3' && double(1) == 1.0", True),
    ("duration('1h') > duration('30m') && timestamp('2024-01-01T00:00:00Z') < "
     "timestamp('2025-01-01T00:00:00Z')", True),
    ("self.?nope.orValue('none')", "none"),
    ("cel.bind(n, self.items.size(), n * n)", 9),
])
def test_ex3_cel_standard_macros_and_strings(expr: str, expected: Any) -> None:
    assert _eval(expr, self={"name": "web-a", "items": ["a", "bb", "ccc"]}) == expected


@pytest.mark.parametrize(("expr", "expected"), [
    ("[1, 2, 3].isSorted() && !['b', 'a'].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True),
    ("[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2", True),
    ("'abc 123 def 45'.find('[0-9]+')", "123"),
    ("'abc 123 def 45'.findAll('[0-9]+')", ["123", "45"]),
    ("'abc 123 def 45'.findAll('[0-9]+', 1)", ["123"]),
    ("isURL('https://example.com:8443/path?x=1') && !isURL('not a url')", True),
    ("url('https://example.com:8443/path?x=1').getHost()", "example.com:8443"),
    ("url('https://example.com:8443/path?x=1').getHostname()", "example.com"),
    ("url('https://example.com:8443/path?x=1').getPort()", "8443"),
    ("url('https://example.com:8443/path?x=1').getScheme()", "https"),
    ("url('https://example.com/a/b?x=1&x=2').getQuery()", {"x": ["1", "2"]}),
    ("isQuantity('500Mi') && !isQuantity('five')", True),
    ("quantity('1Gi').isGreaterThan(quantity('500Mi'))", True),
    ("quantity('100m').isLessThan(quantity('1'))", True),
    ("quantity('2').asInteger()", 2),
    ("quantity('1.5').isInteger()", False),
    ("quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
    ("sets.contains([1, 2, 3], [1, 2]) && !sets.contains([1], [2])", True),
    ("sets.equivalent([1, 2], [2, 1, 1]) && sets.intersects([1, 2], [2, 5])", True),
    ("math.greatest(1, 5) + math.least(2, 3)", 7),
    ("'%d items of %s'.format([3, 'x'])", "3 items of x"),
    ("base64.encode(b'hi')", "aGk="),
])
def test_ex3_cel_kubernetes_libraries(expr: str, expected: Any) -> None:
    assert _eval(expr) == expected


def test_ex3_cel_compile_error_keeps_cels_position_and_caret() -> None:
    with pytest.raises(CelCompileError) as err:
        compile_expression("1 + 'a'", variables=[])
    assert str(err.value) == ("ERROR: <input>:1:3: found no matching overload for '_+_' "
                              "applied to '(int, string)'\n | 1 + 'a'\n | ..^")
    with pytest.raises(CelCompileError) as undeclared:
        compile_expression("object == 1", variables=["self"])
    assert str(undeclared.value) == (
        "ERROR: <input>:1:1: undeclared reference to 'object' (in container '')\n"
        " | object == 1\n | ^")


@pytest.mark.parametrize(("expr", "activation", "message"), [
    ("self.missing == 1", {"self": {}}, "no such key: missing"),
    ("self + 1", {"self": "a"}, "no such overload"),
    ("self / 0 == 1", {"self": 1}, "division by zero"),
    ("self[5] == 1", {"self": [1, 2]}, "index '5' out of range in list size '2'"),
    ("[].min() == 1", {"self": 1}, "min(list) called on empty list"),
    ("self == oldSelf", {"self": 1, "oldSelf": None}, "no such attribute(s): oldSelf"),
])
def test_ex3_cel_runtime_errors_read_as_cel_go_words_them(
        expr: str, activation: dict[str, Any], message: str) -> None:
    # a variable given as None is declared but left out of the activation
    program = compile_expression(expr, variables=list(activation))
    with pytest.raises(CelEvalError) as err:
        evaluate(program, {k: v for k, v in activation.items() if v is not None})
    assert str(err.value) == message


def test_ex3_cel_typed_variables_and_time_values() -> None:
    program = compile_expression("self > 1", variables={"self": "int"})
    assert program.result_type == "bool"
    assert evaluate(program, {"self": 2}) is True
    with pytest.raises(CelCompileError):
        compile_expression("self.x", variables={"self": "int"})
    stamp = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    assert _eval("self.getFullYear()", self=stamp) == 2025
    assert _eval("self > duration('1s')", self=datetime.timedelta(seconds=3)) is True


def test_ex3_cel_programs_are_cached_by_text() -> None:
    first = compile_expression("self.a == 1", variables=["self"])
    assert compile_expression("self.a == 1", variables=["self"]) is first
    assert compile_expression("self.a == 1", variables={"self": "map"}) is not first


@pytest.mark.parametrize(("expr", "uses"), [
    ("self == oldSelf", True),
    ("oldSelf.hasValue()", True),
    ("self.oldSelf == 1", False),
    ("self.name == 'oldSelf'", False),
    ("self.oldSelfish == 1", False),
])
def test_ex3_cel_transition_rule_is_one_that_names_old_self(expr: str, uses: bool) -> None:
    assert references(expr, "oldSelf") is uses


@pytest.mark.parametrize("value", ["abc", 1.5, None, object()])
def test_ex3_cel_value_of_the_wrong_type_is_no_such_overload(value: Any) -> None:
    program = compile_expression("self > 1", variables={"self": "int"})
    with pytest.raises(CelEvalError) as err:
        evaluate(program, {"self": value})
    assert str(err.value) == "no such overload"


@pytest.mark.parametrize(("expr", "expected"), [
    ("!format.dns1123Label().validate('my-name').hasValue()", True),
    ("format.dns1123Label().validate('My_Name').value()", [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("format.dns1123LabelPrefix().validate('my-').hasValue()", False),
    ("format.dns1035Label().validate('1abc').hasValue()", True),
    ("format.named('uuid').hasValue() && !format.named('nope').hasValue()", True),
    ("format.named('uuid').value().validate('123e4567-e89b-12d3-a456-426614174000')"
     ".hasValue()", False),
    ("format.uuid().validate('nope').value()", ["does not match the UUID format"]),
    ("format.qualifiedName().validate('example.com/Name').hasValue()", False),
])
def test_ex3_cel_format_library(expr: str, expected: Any) -> None:
    assert _eval(expr) == expected


@pytest.mark.parametrize(("expr", "expected"), [
    ("isIP('10.0.0.1') && isIP('fd00::1') && !isIP('10.0.0.1/8')", True),
    ("isIP('::ffff:1.2.3.4')", False),
    ("ip('10.0.0.1').family() == 4 && ip('::1').isLoopback()", True),
    ("ip('8.8.8.8').isGlobalUnicast() && !ip('0.0.0.0').isGlobalUnicast()", True),
    ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP("
     "'11.0.0.1')", True),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    ("cidr('10.1.2.3/8').masked().prefixLength()", 8),
    ("isCIDR('10.0.0.0/33')", False),
])
def test_ex3_cel_ip_and_cidr_libraries(expr: str, expected: Any) -> None:
    assert _eval(expr) == expected


def test_ex3_cel_bad_ip_reads_as_kubernetes_words_it() -> None:
    with pytest.raises(CelEvalError) as err:
        _eval("ip('nope').family() == 4")
    assert str(err.value) == ('IP Address "nope" parse error during conversion from string: '
                              'ParseAddr("nope"): unable to parse IP')
