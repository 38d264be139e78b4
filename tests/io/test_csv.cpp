// CSV samples: layouts, header detection, comments, number formats, errors (a mixed first line, other
// separators, values beyond float), the line of each sample, write -> read.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "nnlens/io/csv.hpp"

using namespace nnlens;

namespace {
std::string err(const std::string& text, shape s, io::csv_options o = {}) {
  try {
    io::parse_csv(text, s, "in.csv", o);
  } catch (const io_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("csv: rank-1 samples with a header, comments, whitespace, any float format") {
  const std::string text =
      "# exported by hand\n"
      "x0, x1 ,x2\n"
      "1, 2.5, -3e-1   # trailing comment\n"
      "\r\n"
      "  +4.0E+1,\t.5,-0,\r\n"
      "6,7,8\n";
  auto x = io::parse_csv<double>(text, shape(3));
  REQUIRE(x.shape() == std::vector<std::size_t>{3, 3});
  const double e[9] = {1, 2.5, -0.3, 40, 0.5, -0.0, 6, 7, 8};
  for (int i = 0; i < 9; ++i) CHECK(x.data()[i] == e[i]);
  // rank 0: the column count comes from the data
  auto y = io::parse_csv<float>("1,2\n3,4\n", shape());
  CHECK(y.shape() == std::vector<std::size_t>{2, 2});
  CHECK(y(1, 0) == 3.0f);
  // the header switch: forced present skips a numeric first line; absent makes a name an error
  io::csv_options present;
  present.header = io::csv_header::present;
  CHECK(io::parse_csv("9,9\n1,2\n", shape(2), "h", present).shape(0) == 1);
  io::csv_options absent;
  absent.header = io::csv_header::absent;
  CHECK(err("a,b\n1,2\n", shape(2), absent).find("in.csv:1:1: 'a' is not a finite number") != std::string::npos);
  io::csv_options semi;
  semi.delimiter = ';';
  CHECK(io::parse_csv("1;2\n", shape(2), "s", semi)(0, 1) == 2.0f);
}

TEST_CASE("csv: [C,H,W] samples are read row-major in NCHW order") {
  std::string line;
  for (int i = 0; i < 12; ++i) line += std::to_string(i) + (i < 11 ? "," : "\n");
  auto x = io::parse_csv<float>(line + line, shape(3, 2, 2));
  REQUIRE(x.shape() == std::vector<std::size_t>{2, 3, 2, 2});
  CHECK(x(1, 2, 1, 0) == 10.0f);  // c=2, h=1, w=0 -> 2*4 + 1*2 + 0
  CHECK(x(0, 1, 0, 1) == 5.0f);
}

TEST_CASE("csv: errors name file, line and column") {
  CHECK(err("1,2,3\n4,5\n", shape(3)).find("in.csv:2:3: expected 3 values per sample (sample shape [3]), found 2") !=
        std::string::npos);
  CHECK(err("1,2,3\n4,5,6,7\n", shape(3)).find("in.csv:2:4: expected 3 values per sample") != std::string::npos);
  CHECK(err("1,2,3\n4,x5,6\n", shape(3)).find("in.csv:2:2: 'x5' is not a finite number") != std::string::npos);
  CHECK(err("1,2,3\n4,,6\n", shape(3)).find("in.csv:2:2: '' is not a finite number") != std::string::npos);
  CHECK(err("1,2,nan\n", shape(3)).find("in.csv:1:3: 'nan' is not a finite number") != std::string::npos);
  CHECK(err("1,2,1e39\n", shape(3)).find("in.csv:1:3") != std::string::npos);  // overflows float
  CHECK(err("", shape(3)).find("in.csv: no samples") != std::string::npos);
  CHECK(err("# only a comment\n\n", shape(3)).find("no samples") != std::string::npos);
  CHECK(err("a,b,c\n", shape(3)).find("no samples") != std::string::npos);
  io::csv_options small;
  small.max_values = 4;
  CHECK(err("1,2\n3,4\n5,6\n", shape(2), small).find("in.csv:3:1: more than 4 values") != std::string::npos);
  CHECK_THROWS_AS(io::parse_csv("1\n", shape(dyn)), shape_error);
  CHECK_THROWS_WITH_AS(io::read_csv("/nonexistent.csv", shape(2)), "/nonexistent.csv: cannot open", io_error);
}

TEST_CASE("csv: write -> read is exact") {
  xt::xarray<float> y = {{1.0f / 3.0f, -2.5e-30f, 7.0f}, {3.4028235e38f, 0.0f, -1.0f}};
  std::ostringstream os;
  io::write_csv(os, y);
  CHECK(os.str().find("0.33333334,-2.5e-30,7\n") == 0);
  auto back = io::parse_csv<float>(os.str(), shape(3));
  CHECK(back == y);
  const auto tmp = std::filesystem::temp_directory_path() / "nnlens_test.csv";
  xt::xarray<double> z = xt::xarray<double>{{0.1, 0.2}, {1e300, -1e-300}};
  io::write_csv(tmp, z);
  CHECK(io::read_csv<double>(tmp, shape(2)) == z);
  std::filesystem::remove(tmp);
}

TEST_CASE("csv: a first line with numbers and non-numbers is a data line, and so an error") {
  // Before: "0.1,abc,0.3" was dropped as a header and the file read as 1 sample, silently.
  CHECK(err("0.1,abc,0.3\n1,2,3\n", shape(3)).find("in.csv:1:2: 'abc' is not a finite number") != std::string::npos);
  CHECK(err("x0,1,x2\n1,2,3\n", shape(3)).find("in.csv:1:1: 'x0' is not a finite number") != std::string::npos);
  CHECK(err("# comment\n\n1,2,abc\n4,5,6\n", shape()).find("in.csv:3:3: 'abc' is not a finite number") !=
        std::string::npos);
  CHECK(err("nan,inf,-inf\n1,2,3\n", shape(3)).find("in.csv:1:1: 'nan' is not a finite number") != std::string::npos);
  // a header of names only (empty fields allowed) is still detected
  CHECK(io::parse_csv("x0,,x2\n1,2,3\n4,5,6\n", shape(3)).shape(0) == 2);
  CHECK(io::parse_csv("label\n1\n2\n", shape()).shape(0) == 2);
  // the caller can say there is a header: then the first line is skipped whatever it holds
  io::csv_options present;
  present.header = io::csv_header::present;
  auto x = io::parse_csv("0.1,abc,0.3\n1,2,3\n", shape(3), "h", present);
  REQUIRE(x.shape(0) == 1);
  CHECK(x(0, 2) == 3.0f);
  io::csv_options absent;
  absent.header = io::csv_header::absent;
  CHECK(err("x0,x1,x2\n1,2,3\n", shape(3), absent).find("in.csv:1:1: 'x0' is not a finite number") !=
        std::string::npos);
}

TEST_CASE("csv: another separator is named in the message") {
  const std::string semi = "fields separated by ';' -- nnlens reads comma-separated values";
  CHECK(err("1;2;3\n4;5;6\n", shape(3)).find("in.csv:1:2: " + semi) != std::string::npos);
  CHECK(err("1;2;3\n", shape()).find("in.csv:1:1: " + semi) != std::string::npos);
  CHECK(err("x0;x1;x2\n1;2;3\n", shape(3)).find("in.csv:2:2: " + semi) != std::string::npos);  // header skipped
  CHECK(err("1\t2\t3\n", shape(3)).find("in.csv:1:2: fields separated by tabs -- nnlens reads comma-separated") !=
        std::string::npos);
  CHECK(err("1 2  3\n", shape(3)).find("in.csv:1:2: fields separated by spaces") != std::string::npos);
  CHECK(err("1|2|3\n", shape(3)).find("fields separated by '|'") != std::string::npos);
  CHECK(err("0,5;1,25;2\n", shape(3)).find("fields separated by ';' with decimal commas -- nnlens reads "
                                           "comma-separated values with '.' as the decimal point") != std::string::npos);
  io::csv_options semi_opt;
  semi_opt.delimiter = ';';
  CHECK(err("1,2,3\n", shape(3), semi_opt).find("fields separated by ',' -- this reader expects ';'-separated") !=
        std::string::npos);
  // no hint where no other separator explains the line
  const std::string e = err("1,2,3 4\n", shape(3));
  CHECK(e.find("in.csv:1:3: '3 4' is not a finite number") != std::string::npos);
  CHECK(e.find("separated") == std::string::npos);
  CHECK(err("1,2\n", shape(3)).find("in.csv:1:3: expected 3 values per sample (sample shape [3]), found 2") == 0);
}

TEST_CASE("csv: a finite value beyond float is out of float range, not 'not finite'") {
  const std::string e = err("1,1e308,3\n", shape(3));
  CHECK(e.find("in.csv:1:2: '1e308' is finite but out of float range") != std::string::npos);
  CHECK(e.find("--precision f64") != std::string::npos);
  auto d = io::parse_csv<double>("1,1e308,-1e-400\n", shape(3));
  CHECK(d(0, 1) == 1e308);
  CHECK(d(0, 2) == 0.0);  // underflows to (negative) zero, as 1e-50 does in float
  CHECK(std::signbit(d(0, 2)));
  CHECK(io::parse_csv<float>("1e-50\n", shape(1))(0, 0) == 0.0f);
  try {
    (void)io::parse_csv<double>("1,1e400,3\n", shape(3), "in.csv");
    FAIL("1e400 was accepted");
  } catch (const io_error& x) {
    CHECK(std::string(x.what()) == "in.csv:1:2: '1e400' is out of double range");
  }
}

TEST_CASE("csv: parse_csv_rows gives the file line of every sample") {
  io::csv_options present;
  present.header = io::csv_header::present;
  auto r = io::parse_csv_rows<double>("# c\nh1,h2\n1,2\n\n# x\n3,4 # y\n5,6", shape(2), "in.csv", present);
  REQUIRE(r.x.shape(0) == 3);
  CHECK(r.lines == std::vector<std::size_t>{3, 6, 7});
  CHECK(r.x(2, 1) == 6.0);
  auto q = io::parse_csv_rows<float>("7,8\n9,10\n", shape());
  CHECK(q.lines == std::vector<std::size_t>{1, 2});
}
