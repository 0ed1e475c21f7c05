// core/json_writer: Python-compatible float repr and json.dumps, escaping, the streaming writer.
#include <catch2/catch.hpp>

#include "core/json_writer.hpp"

using namespace dsv41;

TEST_CASE("chat json: python_float matches Python's repr", "[unit][chat]") {
  // Expected strings are Python 3 repr() of the same doubles.
  CHECK(json::python_float(45.0) == "45.0");
  CHECK(json::python_float(0.1) == "0.1");
  CHECK(json::python_float(1e-05) == "1e-05");
  CHECK(json::python_float(0.0001) == "0.0001");
  CHECK(json::python_float(1e16) == "1e+16");
  CHECK(json::python_float(1e15) == "1000000000000000.0");
  CHECK(json::python_float(-2.5e20) == "-2.5e+20");
  CHECK(json::python_float(12345.678) == "12345.678");
  CHECK(json::python_float(1.5e-7) == "1.5e-07");
  CHECK(json::python_float(123456789012345680.0) == "1.2345678901234568e+17");
  CHECK(json::python_float(0.25) == "0.25");
  CHECK(json::python_float(-0.0) == "-0.0");
  CHECK(json::python_float(1e300) == "1e+300");
  CHECK(json::python_float(5e-324) == "5e-324");
}

TEST_CASE("chat json: escaping and python_dumps", "[unit][chat]") {
  CHECK(json::quote("a\"b\\c\n\t\r\b\f\x07\x1f é 📅 <｜>") ==
        "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0007\\u001f é 📅 <｜>\"");
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(std::string(
      R"({"b":1,"a":[1.0,2.5e-5,true,null,{"x":"y"}],"c":{},"d":[],"e":-7,"f":18446744073709551615,"b":2})"));
  CHECK(
      json::python_dumps(e) ==
      R"({"b": 2, "a": [1.0, 2.5e-05, true, null, {"x": "y"}], "c": {}, "d": [], "e": -7, "f": 18446744073709551615})");
}

TEST_CASE("chat json: Writer produces compact JSON with commas in place", "[unit][chat]") {
  json::Writer w;
  w.begin_object().key("a").value(int64_t{1}).key("b").begin_array().value("x").null().value(true);
  w.value(0.5).end_array().key("c").begin_object().end_object().key("d").raw("[1]").end_object();
  CHECK(w.str() == R"({"a":1,"b":["x",null,true,0.5],"c":{},"d":[1]})");
}
