#include "pipeplan/hardware/gpu_catalogue.hpp"

#include <gtest/gtest.h>

namespace pipeplan::hardware {
namespace {

TEST(GpuCatalogueTest, HoldsTheIssuesGpus) {
  for (const char* name :
       {"V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM", "H200", "GH200", "B200", "MI300X"}) {
    const GpuType* gpu = find_gpu(name);
    ASSERT_NE(gpu, nullptr) << name;
    EXPECT_EQ(gpu->name, name);
    EXPECT_GT(gpu->memory_bytes, 0) << name;
    EXPECT_GT(gpu->memory_bandwidth_bytes_per_s, 0) << name;
    EXPECT_GT(training_peak_flops_per_s(*gpu), 0) << name;
    EXPECT_EQ(gpu->source.rfind("https://", 0), 0u) << name;
  }
  EXPECT_EQ(gpu_catalogue().size(), 8u);
}

TEST(GpuCatalogueTest, MatchesSpellingsAndAliases) {
  EXPECT_EQ(find_gpu("a100 80gb")->name, "A100-80GB");
  EXPECT_EQ(find_gpu("NVIDIA A100_80GB")->name, "A100-80GB");
  EXPECT_EQ(find_gpu("A100")->name, "A100-80GB");
  EXPECT_EQ(find_gpu("Tesla V100-SXM2-32GB")->name, "V100-32GB");
  EXPECT_EQ(find_gpu("NVIDIA H100")->name, "H100-SXM");
  EXPECT_EQ(find_gpu("AMD Instinct MI300X")->name, "MI300X");
  EXPECT_EQ(find_gpu("A100-16GB"), nullptr);
  EXPECT_EQ(find_gpu(""), nullptr);
  EXPECT_EQ(find_gpu("nvidia"), nullptr);
}

TEST(GpuCatalogueTest, PeaksPerFormat) {
  const GpuType& v100 = *find_gpu("V100-32GB");
  EXPECT_EQ(peak_flops_per_s(v100, DType::kBf16), 0);  // no bf16 tensor cores
  EXPECT_EQ(peak_flops_per_s(v100, DType::kFp16), 125e12);
  EXPECT_EQ(training_peak_flops_per_s(v100), 125e12);  // fp16 where there is no bf16
  const GpuType& h100 = *find_gpu("H100-SXM");
  EXPECT_EQ(peak_flops_per_s(h100, DType::kBf16), 989.4e12);  // dense: half the sparse 1979
  EXPECT_EQ(peak_flops_per_s(h100, DType::kFp8), 1978.9e12);
  EXPECT_EQ(peak_flops_per_s(*find_gpu("A100-80GB"), DType::kFp8), 0);
  EXPECT_EQ(parse_dtype("tf32"), DType::kTf32);
  EXPECT_EQ(parse_dtype("int8"), std::nullopt);
  EXPECT_EQ(dtype_name(DType::kFp8), "fp8");
  EXPECT_EQ(activation_value_bytes(DType::kFp8), 2);
  EXPECT_EQ(activation_value_bytes(DType::kTf32), 4);
  EXPECT_EQ(catalogue_names(),
            "V100-32GB, A100-40GB, A100-80GB, H100-SXM, H200, GH200, B200, MI300X");
}

}  // namespace
}  // namespace pipeplan::hardware
