// The tunables registry: defaults, typed overrides, environment reading, warnings.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "core/tunables.hpp"

using namespace dsv41;

TEST_CASE("tunables: defaults, typed set(), markdown", "[unit][tunables]") {
  Tunables t;
  REQUIRE(t.get_int("DSV41_THREADS") == 0);
  REQUIRE(t.get_string("DSV41_LOG_LEVEL") == "info");
  REQUIRE(t.set("DSV41_THREADS", "4").is_ok());
  REQUIRE(t.get_int("DSV41_THREADS") == 4);
  Status bad = t.set("DSV41_THREADS", "four");
  REQUIRE_FALSE(bad.is_ok());
  REQUIRE_THAT(bad.message(), Catch::Contains("DSV41_THREADS=four"));
  REQUIRE_FALSE(t.set("DSV41_NOPE", "1").is_ok());
  REQUIRE_THAT(Tunables::markdown(), Catch::Contains("`DSV41_THREADS`"));
  for (const auto& s : tunable_specs()) REQUIRE(std::string(s.name).rfind("DSV41_", 0) == 0);
}

TEST_CASE("tunables: environment values and unknown DSV41_* variables", "[unit][tunables]") {
  ::setenv("DSV41_THREADS", "3", 1);
  ::setenv("DSV41_TYPO_VARIABLE", "1", 1);
  std::vector<std::string> warnings;
  Tunables t = Tunables::from_environment(&warnings);
  ::unsetenv("DSV41_THREADS");
  ::unsetenv("DSV41_TYPO_VARIABLE");
  REQUIRE(t.get_int("DSV41_THREADS") == 3);
  REQUIRE(warnings.size() == 1);
  REQUIRE_THAT(warnings[0], Catch::Contains("DSV41_TYPO_VARIABLE"));
}
