// The random tiny model with its tokenizer and a CPU backend: the engine tests' common setup.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"

namespace kvserve::testing {

// Fills the three from random:tiny with `seed`; fails the calling test (ASSERT) on error.
inline void MakeTinyModel(uint32_t seed, std::unique_ptr<Model>* model, std::unique_ptr<Tokenizer>* tokenizer,
                          std::unique_ptr<Backend>* backend) {
  auto m = MakeRandomModel("tiny", seed);
  ASSERT_TRUE(m.ok()) << m.status();
  *model = std::make_unique<Model>(*std::move(m));
  auto t = Tokenizer::Create((*model)->tokenizer);
  ASSERT_TRUE(t.ok()) << t.status();
  *tokenizer = std::make_unique<Tokenizer>(*std::move(t));
  *backend = MakeCpuBackend();
}

}  // namespace kvserve::testing
