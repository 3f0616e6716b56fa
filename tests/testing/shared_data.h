// Test access to ../shared (models, vocabularies, golden outputs). A test that needs a file and cannot
// find it fails with a message that says where it looked.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace strata::testing {

// The shared data folder: $STRATA_SHARED_DIR if set, else ../shared beside the checkout.
std::filesystem::path shared_dir();

// Absolute path of a file under shared/, or "" after recording a test failure naming the path.
std::string shared_file(const std::string& relative);

// The strata binary built with the tests.
std::string strata_binary();

// Reads a whole file into a string; "" and a test failure if it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace strata::testing

// Skips nothing: a missing shared file is a failure, and the test stops here.
#define STRATA_SHARED_FILE(var, rel)                    \
  const std::string var = ::strata::testing::shared_file(rel); \
  if (var.empty()) return
