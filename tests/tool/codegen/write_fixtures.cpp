// tests/tool/codegen/write_fixtures.cpp -- build-time fixtures of the codegen and tool tests:
//   write_fixtures DIR   writes DIR/all_layers_generated.hpp (io::write_header on AllLayers),
//                        DIR/lenet5.nnlw (LeNet-5, seeded initialisation), DIR/lenet5_input.csv (5 samples) and
//                        bad inputs: bad_width.csv, bad_value.csv, corrupt.nnlw.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include <nnlens/io/codegen.hpp>
#include <nnlens/io/weights.hpp>

#include "../../../tools/nnlens/lenet5_recipe.hpp"
#include "all_layers_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_fixtures DIR\n";
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    nnlens::io::write_header(dir / "all_layers_generated.hpp", nnlens::test::make_all_layers(),
                             {.name = "all_layers", .ns = "gen::nested", .source = "tests/tool/codegen/all_layers_model.hpp"});
    nnlens::demo::LeNet5 lenet;
    nnlens::initialize(lenet, 5);
    nnlens::io::save_weights(dir / "lenet5.nnlw", lenet, {{"model", "lenet5"}});
    std::ofstream csv(dir / "lenet5_input.csv");
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int s = 0; s < 5; ++s)
      for (int i = 0; i < 784; ++i) csv << u(rng) << (i == 783 ? "\n" : ",");
    if (!csv) throw std::runtime_error("cannot write the CSV");
    {
      std::ofstream bad(dir / "bad_width.csv");
      bad << "# a comment, then a good line and a short one\n0";
      for (int i = 1; i < 784; ++i) bad << ",0";
      bad << "\n1,2,3\n";
    }
    {
      std::ofstream bad(dir / "bad_value.csv");  // a good line first (else it reads as a header)
      bad << "0";
      for (int i = 1; i < 784; ++i) bad << ",0";
      bad << "\n1,abc";
      for (int i = 2; i < 784; ++i) bad << ",0";
      bad << "\n";
    }
    std::ofstream(dir / "corrupt.nnlw") << "this is not a weights file, but long enough to have a header";
  } catch (const std::exception& e) {
    std::cerr << "write_fixtures: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
