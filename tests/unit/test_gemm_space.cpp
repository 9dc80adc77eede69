// The gemm family's resources, names and hashes, its whole config space and spread sample, and
// the heuristic default for real and awkward shapes (split-K included).
#include "generator/families/gemm_geometry.hpp"
#include "tests/unit/gemm_spec_rules.hpp"

namespace fp8jit {
namespace {

using namespace gemm_spec_test;

// ---- resources, names ----------------------------------------------------------------------

TEST(GemmSpecSmem, FormulaPinned) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem rowwise{Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise,
                            true};
  // 4 x ((128 + 128) x 128 bytes of A and B + (128 + 8 -> 160) x 4 bytes of staged scales + 16 bytes
  // of barriers) + 128 + 128 x 128 x 2 bytes of D + 1024 bytes of alignment.
  auto smem = [](const GemmProblem& p, const GemmConfig& c) { return gemm_geometry(p, c).smem_bytes; };
  EXPECT_EQ(smem(block, {128, 128, 4, 8}), 167616);
  EXPECT_EQ(smem(rowwise, {64, 16, 2, 1}), 25760);
  EXPECT_EQ(smem(block, {256, 256, 8, 8}), 665856);
  EXPECT_EQ(spec_dynamic_smem(tile("block", 128, 128, 4)), 167616);
  EXPECT_EQ(spec_dynamic_smem(raw("e5m2", "e4m3", "fp32", "rowwise", 1, 64, 16, 2, 1)), 25760);
  // Only the output type and the scale mode enter from the problem; group_m does not enter.
  EXPECT_EQ(smem(block, {128, 128, 4, 1}), smem(block, {128, 128, 4, 16}));
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  EXPECT_EQ(smem(tensor, {128, 128, 4, 8}),
            smem({Fp8Format::e5m2, Fp8Format::e4m3, DType::fp16, ScaleMode::rowwise, true, true}, {128, 128, 4, 8}));
  EXPECT_EQ(smem(block, {128, 128, 4, 8}) - smem(tensor, {128, 128, 4, 8}), 4 * 160 * 4);
  EXPECT_EQ(smem({Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::block}, {128, 128, 4, 8}) -
                smem(block, {128, 128, 4, 8}),
            128 * 128 * 2);
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    for (DType out : {DType::bf16, DType::fp16, DType::fp32})
      for (int bm : {64, 128, 256})
        for (int bn : {16, 136, 256})
          for (int st = 2; st <= 8; ++st)
            ASSERT_EQ(smem({Fp8Format::e4m3, Fp8Format::e4m3, out, *parse_scale_mode(scale)}, {bm, bn, st, 8}),
                      smem_model(bm, bn, st, static_cast<int>(dtype_size(out)), staged_scales(scale, bm, bn)))
                << scale << " " << bm << "x" << bn << " s" << st;
}

// The epilogue's slab in swizzled panels (128, 64 or 32 bytes) wherever D's rows are whole panels
// wide, grouped layouts included (a slab past a group's end is copied out by the warpgroup), and
// not one warpgroup holding 256 columns in two halves nor 256-row tiles per row with a bias, nor
// per row or per tensor with a bias in builds with every epilogue (ptxas spills those), nor
// grouped 256-row tiles but block-scaled ones.
TEST(GemmGeometrySlab, SwizzledOnlyForDenseTilesOfWholePanels) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  const GemmProblem fp32{Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise};
  GemmProblem grouped = block;
  grouped.layout = GemmLayout::contiguous;
  auto swizzled = [](const GemmProblem& p, const GemmConfig& c) { return gemm_geometry(p, c).swizzled_slab; };
  EXPECT_TRUE(swizzled(block, {128, 256, 3, 8}));   // 512 bytes a row: 4 panels, column halves
  EXPECT_TRUE(swizzled(block, {256, 128, 3, 8}));
  EXPECT_TRUE(swizzled(tensor, {256, 128, 3, 8}));
  GemmProblem rowwise = tensor, tensor_bias = tensor;
  rowwise.scale = ScaleMode::rowwise;
  tensor_bias.bias = true;
  GemmProblem rowwise_bias = rowwise;
  rowwise_bias.bias = true;
  const GemmConfig tall{256, 128, 3, 8}, tall_tma{256, 128, 3, 8, 1, 1, GemmEpilogue::tma};
  // Per row, and per tensor with a bias: panels in TMA-only builds, row-major in those with every
  // epilogue; per row with a bias row-major in both.
  EXPECT_TRUE(swizzled(rowwise, tall_tma));
  EXPECT_TRUE(swizzled(tensor_bias, tall_tma));
  EXPECT_FALSE(swizzled(rowwise, tall));
  EXPECT_FALSE(swizzled(tensor_bias, tall));
  EXPECT_FALSE(swizzled(rowwise_bias, tall_tma));
  EXPECT_FALSE(swizzled(rowwise_bias, {256, 64, 3, 8, 1, 1, GemmEpilogue::tma}));
  EXPECT_TRUE(swizzled(tensor, tall));
  EXPECT_TRUE(swizzled(tensor, {128, 192, 4, 8}));
  EXPECT_TRUE(swizzled(tensor, {64, 64, 6, 8}));     // one panel
  EXPECT_TRUE(swizzled(fp32, {128, 96, 4, 8}));      // 384 bytes: 32 FP32 columns a panel
  // Rows of 64- or 32-byte multiples in narrower panels; rows of 16-byte multiples row-major.
  auto panel = [](const GemmProblem& p, const GemmConfig& c) {
    return gemm_geometry(p, c).panel_bytes;
  };
  EXPECT_EQ(panel(tensor, {128, 192, 4, 8}), 128);
  EXPECT_EQ(panel(block, {128, 96, 6, 8}), 64);    // 192 bytes: 3 panels
  EXPECT_EQ(panel(block, {128, 144, 5, 8}), 32);   // 288 bytes: 9 panels
  EXPECT_EQ(panel(tensor, {128, 224, 4, 8}), 64);  // 448 bytes: 7 panels
  EXPECT_EQ(panel(tensor, {128, 176, 4, 8}), 32);  // 352 bytes: 11 panels
  EXPECT_EQ(panel(tensor, {128, 208, 4, 8}), 0);   // 416 bytes: 13 would be too many
  EXPECT_EQ(panel(fp32, {128, 80, 4, 8}), 64);     // 320 bytes
  EXPECT_EQ(panel(fp32, {64, 40, 8, 8}), 32);      // 160 bytes
  EXPECT_EQ(panel(block, {64, 40, 8, 8}), 0);      // 80 bytes
  EXPECT_EQ(panel(block, {64, 56, 8, 8}), 0);
  EXPECT_EQ(panel(rowwise, {256, 96, 3, 8, 1, 1, GemmEpilogue::tma}), 64);  // 192 bytes: 3 panels
  EXPECT_EQ(panel(rowwise, {256, 96, 3, 8}), 0);
  EXPECT_EQ(panel(rowwise_bias, {256, 96, 3, 8, 1, 1, GemmEpilogue::tma}), 0);
  EXPECT_TRUE(swizzled(grouped, {128, 256, 3, 8}));
  EXPECT_TRUE(swizzled(grouped, {128, 144, 5, 8}));
  EXPECT_TRUE(swizzled(grouped, {256, 128, 3, 8}));
  GemmProblem grouped_tensor = tensor;
  grouped_tensor.layout = GemmLayout::contiguous;
  EXPECT_FALSE(swizzled(grouped_tensor, {256, 128, 3, 8}));  // not yet run on a GPU in panels
  EXPECT_TRUE(swizzled(grouped_tensor, {128, 192, 4, 8}));
  ASSERT_EQ(gemm_geometry(block, {64, 256, 3, 8}).chunks, 2);
  EXPECT_FALSE(swizzled(block, {64, 256, 3, 8}));
  // The swizzle changes the layout inside the slab, not its size.
  EXPECT_EQ(gemm_geometry(block, {128, 256, 3, 8}).epi_slab, 64 * 256 * 2);
}

// A's block scales: grouped tiles take 4 rows more (their box starts on the row rounded down to
// 4), which 256-row tiles load in two boxes of 132 rows 128 apart (a box holds 256); the bytes the
// stage's barrier expects count both boxes, and the stage's scales keep their 128-byte rounding.
TEST(GemmGeometryScales, GroupedTallTilesLoadAsScalesInTwoBoxes) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  GemmProblem grouped = block, masked = block;
  grouped.layout = GemmLayout::contiguous;
  masked.layout = GemmLayout::masked;
  const GemmGeometry dense256 = gemm_geometry(block, {256, 128, 3, 8});
  EXPECT_EQ(dense256.scales_a, 256);
  EXPECT_EQ(dense256.scale_box_a, 256);
  EXPECT_EQ(dense256.scale_tma_bytes, 4 * 256);
  const GemmGeometry g128 = gemm_geometry(grouped, {128, 256, 3, 8});
  EXPECT_EQ(g128.scales_a, 132);
  EXPECT_EQ(g128.scale_box_a, 132);
  EXPECT_EQ(g128.scale_tma_bytes, 4 * 132);
  for (const GemmProblem& p : {grouped, masked}) {
    const GemmGeometry g = gemm_geometry(p, {256, 128, 3, 8});
    EXPECT_EQ(g.scales_a, 260);
    EXPECT_EQ(g.scale_box_a, 132);
    EXPECT_EQ((g.scales_a - g.scale_box_a) % 4, 0);  // the second box starts on 16 bytes too
    EXPECT_EQ(g.scale_tma_bytes, 4 * 2 * 132);
    EXPECT_EQ(g.stage_scales, 288);  // 260 of A, 8 of B, rounded to 32
  }
}

// Pipelined promotion (a second set of wgmma temporaries) exactly for promoted tiles of one pass
// and one m64 slab per warpgroup up to 128 columns, with block scaling widths dividing 128 and
// 64-row tiles up to 112 wide; the kernel takes the fact from here, and so does the cost model.
TEST(GemmGeometryPipelined, OnePassTilesUpTo128Columns) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  const GemmProblem rowwise{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::rowwise};
  const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                         ScaleMode::tensor, false,           true};
  auto pipelined = [](const GemmProblem& p, const GemmConfig& c) {
    return gemm_geometry(p, c).pipelined;
  };
  EXPECT_TRUE(pipelined(block, {128, 128, 5, 8}));
  EXPECT_TRUE(pipelined(block, {64, 32, 16, 8}));
  EXPECT_TRUE(pipelined(tensor, {128, 112, 6, 8}));
  EXPECT_TRUE(pipelined(rowwise, {64, 128, 6, 8}));
  EXPECT_TRUE(pipelined(tensor, {64, 8, 16, 8}));
  EXPECT_TRUE(pipelined(block, {64, 48, 15, 8}));     // straddles two blocks of B: a loop per split
  EXPECT_TRUE(pipelined(block, {64, 96, 6, 8}));
  EXPECT_TRUE(pipelined(block, {64, 56, 8, 8}));      // seven splits: the split as data
  EXPECT_TRUE(pipelined(block, {64, 112, 6, 8}));
  EXPECT_FALSE(pipelined(block, {64, 120, 6, 8}));    // spills with a second set
  EXPECT_FALSE(pipelined(block, {128, 96, 6, 8}));    // straddling 128-row tiles lose at short K
  EXPECT_FALSE(pipelined(tensor, {128, 136, 6, 8}));  // no room for a second set
  EXPECT_FALSE(pipelined(block, {128, 256, 3, 8}));   // column halves
  EXPECT_FALSE(pipelined(block, {256, 64, 4, 8}));    // two m64 slabs per warpgroup
  EXPECT_TRUE(pipelined(fast, {64, 32, 16, 8}));      // two sets of sums, added after the loop
  EXPECT_TRUE(pipelined(fast, {64, 128, 6, 8}));
  EXPECT_FALSE(pipelined(fast, {64, 136, 6, 8}));   // no room for a second set
  EXPECT_FALSE(pipelined(fast, {128, 128, 6, 8}));  // two warpgroups take turns instead
}

// A straddling tile's split between its two blocks of B is data (a select per column group) only
// beyond three splits: 24, 48 and 96 have a loop copy per split, and tiles that divide 128 or are
// not block-scaled have no split at all.
TEST(GemmGeometryPipelined, SplitAsDataBeyondThreeSplits) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  auto as_data = [](const GemmProblem& p, const GemmConfig& c) {
    return gemm_geometry(p, c).split_as_data;
  };
  for (int n : {40, 56, 72, 80, 88, 104, 112}) EXPECT_TRUE(as_data(block, {64, n, 6, 8})) << n;
  for (int n : {24, 48, 96, 32, 64, 128, 120}) EXPECT_FALSE(as_data(block, {64, n, 6, 8})) << n;
  EXPECT_FALSE(as_data(block, {128, 56, 6, 8}));  // serial
  EXPECT_FALSE(as_data(tensor, {64, 56, 6, 8}));
}

TEST(GemmSpecName, PinnedNameJsonAndHash) {
  // Pinned: a change invalidates every cache entry and tuning record keyed by this spec.
  const KernelSpec s = make_gemm_spec(
      {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false}, {128, 128, 5, 8});
  EXPECT_EQ(spec_name(s), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8");
  EXPECT_EQ(
      spec_to_json(s),
      R"({"config":{"block_m":128,"block_n":128,"cluster_m":1,"cluster_n":1,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
  EXPECT_EQ(spec_hash(s), 0xe9277cddf1874ab5ull);
  const KernelSpec t = make_gemm_spec(
      {Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise, true}, {64, 24, 3, 16});
  EXPECT_EQ(spec_name(t), "gemm_sm90_e5m2e4m3_fp32_rowwise_bias_64x24x128_s3_g16");
  EXPECT_NE(spec_hash(t), spec_hash(s));
  // Fast accumulation shows in the name.
  const KernelSpec f =
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, true, true},
                     {128, 240, 3, 8});
  EXPECT_EQ(spec_name(f), "gemm_sm90_e4m3e4m3_bf16_tensor_fast_bias_128x240x128_s3_g8");
  // Clusters show in the name (only when there is one) and the hash.
  const KernelSpec cm = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                                       {128, 128, 5, 8, 2, 1});
  const KernelSpec cn = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                                       {128, 128, 5, 8, 1, 2});
  EXPECT_EQ(spec_name(cm), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8_c2m");
  EXPECT_EQ(spec_name(cn), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8_c2n");
  EXPECT_EQ(
      spec_to_json(cm),
      R"({"config":{"block_m":128,"block_n":128,"cluster_m":2,"cluster_n":1,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
  EXPECT_EQ(spec_hash(cm), 0xdeaf4a6306101fc2ull);
  EXPECT_EQ(spec_hash(cn), 0x803341f730afda5aull);
  EXPECT_EQ(spec_from_json(spec_to_json(cm)), cm);
  EXPECT_EQ(spec_from_json(spec_to_json(cn)), cn);
  // Unclustered names carry no suffix, whatever the tile.
  EXPECT_EQ(spec_name(t).find("_c2"), std::string::npos);
  EXPECT_EQ(spec_name(f).find("_c2"), std::string::npos);
  EXPECT_NE(spec_hash(f), spec_hash(make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16,
                                                    ScaleMode::tensor, true, true},
                                                   {128, 128, 4, 8})));
}

// Specs saved before the cluster parameters existed (tuning exports, scripts, `fp8jit compile
// --spec` lines) still read, as the unclustered kernel they always named.
TEST(GemmSpecJson, SpecsWithoutClusterKeysReadAsNoCluster) {
  const std::string old_json =
      R"({"config":{"block_m":128,"block_n":128,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})";
  const KernelSpec s = spec_from_json(old_json);
  EXPECT_EQ(s.i("cluster_m"), 1);
  EXPECT_EQ(s.i("cluster_n"), 1);
  EXPECT_EQ(spec_name(s), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8");
  EXPECT_EQ(s, make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                              {128, 128, 5, 8}));
  // One of the two given: the other reads as 1.
  const KernelSpec n2 = spec_from_json(
      R"({"config":{"block_m":128,"block_n":128,"cluster_n":2,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
  EXPECT_EQ(n2.i("cluster_m"), 1);
  EXPECT_EQ(n2.i("cluster_n"), 2);
  // Only config parameters with a stated meaning for "absent" are filled in.
  const std::string no_stages =
      R"({"config":{"block_m":128,"block_n":128,"group_m":8},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})";
  EXPECT_NE(invalid_message([&] { (void)spec_from_json(no_stages); }).find("gemm.stages = <missing>"),
            std::string::npos);
  // In the wrong section, or an invalid value, is still an error.
  EXPECT_NE(invalid_message([&] {
              (void)spec_from_json(
                  R"({"config":{"block_m":128,"block_n":128,"group_m":8,"stages":5},"family":"gemm",)"
                  R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16",)"
                  R"("scale":"block","cluster_m":1}})");
            }).find("belongs in \"config\""),
            std::string::npos);
  EXPECT_NE(invalid_message([&] {
              (void)spec_from_json(
                  R"({"config":{"block_m":128,"block_n":128,"cluster_m":3,"group_m":8,"stages":5},"family":"gemm",)"
                  R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
            }).find("gemm.cluster_m = 3"),
            std::string::npos);
}

TEST(GemmSpecTyped, MakeAndOfRoundTripAndStructDefaults) {
  std::set<std::pair<int, int>> clusters;
  for (const KernelSpec& s : spread_sample(gemm_family(), 200)) {
    const GemmProblem p = gemm_problem_of(s);
    const GemmConfig c = gemm_config_of(s);
    ASSERT_EQ(make_gemm_spec(p, c), s) << spec_name(s);
    EXPECT_EQ(to_string(p.a_format), s.s("a_format"));
    EXPECT_EQ(to_string(p.b_format), s.s("b_format"));
    EXPECT_EQ(to_string(p.out), s.s("out"));
    EXPECT_EQ(to_string(p.scale), s.s("scale"));
    EXPECT_EQ(p.bias, s.i("bias") == 1);
    EXPECT_EQ(p.fast_accum, s.s("accum") == "fast");
    EXPECT_EQ(c.block_m, s.i("block_m"));
    EXPECT_EQ(c.block_n, s.i("block_n"));
    EXPECT_EQ(c.stages, s.i("stages"));
    EXPECT_EQ(c.group_m, s.i("group_m"));
    EXPECT_EQ(c.cluster_m, s.i("cluster_m"));
    EXPECT_EQ(c.cluster_n, s.i("cluster_n"));
    EXPECT_EQ(spec_cluster_size(s), c.cluster_m * c.cluster_n);
    clusters.insert({c.cluster_m, c.cluster_n});
  }
  EXPECT_EQ(clusters, (std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 1}}));
  // The struct defaults: DeepSeek-V3's problem on 128x128 tiles, 4 stages, no cluster.
  EXPECT_EQ(make_gemm_spec({}, {}), tile("block", 128, 128, 4));
  EXPECT_EQ(GemmConfig{}.cluster_m, 1);
  EXPECT_EQ(GemmConfig{}.cluster_n, 1);
  EXPECT_EQ(make_gemm_spec({}, {128, 128, 4, 8, 1, 2}), raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 1, 2));
}

// ---- the config space ----------------------------------------------------------------------

TEST(GemmSpecEnumeration, ExactlyTheSpecsTheRulesAllow) {
  std::size_t expected = 0, expected_grouped = 0, expected_swapped = 0;
  std::map<std::pair<int, int>, std::size_t> expected_by_cluster;
  auto str = [](const ParamValue& v) { return std::get<std::string>(v); };
  auto num = [](const ParamValue& v) { return static_cast<int>(std::get<std::int64_t>(v)); };
  for (const ParamValue& a : param("a_format").allowed)
    for (const ParamValue& b : param("b_format").allowed)
      for (const ParamValue& out : param("out").allowed)
        for (const ParamValue& scale : param("scale").allowed)
          for (const ParamValue& accum : param("accum").allowed)
           for (const ParamValue& layout : param("layout").allowed)
            for (const ParamValue& bm : param("block_m").allowed)
              for (const ParamValue& bn : param("block_n").allowed)
                for (const ParamValue& st : param("stages").allowed)
                  for (const ParamValue& cm : param("cluster_m").allowed)
                    for (const ParamValue& cn : param("cluster_n").allowed)
                      for (const ParamValue& bias : param("bias").allowed)
                        for (const ParamValue& swap : param("swap_ab").allowed)
                          if (valid_by_rules(str(a), str(b), str(out), str(scale), str(accum),
                                             num(bm), num(bn), num(st), num(cm), num(cn), num(bias),
                                             str(layout), num(swap))) {
                            ++expected;
                            ++expected_by_cluster[{num(cm), num(cn)}];
                            expected_grouped += str(layout) != "dense";
                            expected_swapped += num(swap);
                          }
  // group_m never makes a spec invalid.
  const std::size_t free = param("group_m").allowed.size();
  expected *= free;
  for (auto& [cluster, n] : expected_by_cluster) n *= free;
  const std::vector<KernelSpec> all = enumerate_specs(gemm_family());
  EXPECT_EQ(all.size(), expected);
  // The space this suite was written against, block_n 8-256 and stages 2-32: single CTAs
  // (256-row tiles up to 128 columns by slab passes), and clusters wherever the scale mode and
  // tile allow them (not group scaling, not block scaling with 256 rows; along M block_n a
  // multiple of 16); precise tiles up to 256 columns in halves. Grouped layouts (contiguous,
  // masked, indexed) take the dense specs of tensor, rowwise and block scaling without bias, with
  // 8 accumulator registers fewer and no per-tensor or rowwise halves; indexed ones only tiles of
  // 64 or 128 rows and no pairs along M. Swapped operands: dense single CTAs up to 128x128. (With
  // block_n from 16, stages 2-16 and no swap_ab: 791256 in all, 404760 grouped.)
  EXPECT_EQ(all.size(), 1097928u);
  EXPECT_EQ(expected_grouped * free, 532368u);
  EXPECT_EQ(expected_swapped * free, 136776u);
  const std::map<std::pair<int, int>, std::size_t> pinned = {
      {{1, 1}, 558480u}, {{1, 2}, 386304u}, {{2, 1}, 153144u}};
  EXPECT_EQ(expected_by_cluster, pinned);
  std::map<std::pair<int, int>, std::size_t> by_cluster;
  for (const KernelSpec& s : all) {
    const int swap = s.params.count("swap_ab") ? static_cast<int>(s.i("swap_ab")) : 0;
    ASSERT_TRUE(valid_by_rules(
        s.s("a_format"), s.s("b_format"), s.s("out"), s.s("scale"), s.s("accum"),
        static_cast<int>(s.i("block_m")), static_cast<int>(s.i("block_n")),
        static_cast<int>(s.i("stages")), static_cast<int>(s.i("cluster_m")),
        static_cast<int>(s.i("cluster_n")), static_cast<int>(s.i("bias")), s.s("layout"), swap))
        << spec_name(s);
    ++by_cluster[{static_cast<int>(s.i("cluster_m")), static_cast<int>(s.i("cluster_n"))}];
  }
  EXPECT_EQ(by_cluster, pinned);
}

// The family's typed walk (FamilyDef::walk_configs) against the string-keyed rules it stands in
// for: every config combination of a spread of problems, in the generic walk's order, kept where
// `check` passes it.
TEST(GemmSpecEnumeration, TypedWalkAgreesWithCheckSpecBySpec) {
  const FamilyDef& f = gemm_family();
  ASSERT_NE(f.walk_configs, nullptr);
  std::vector<const ParamDef*> configs;
  for (const ParamDef& def : f.params)  // the epilogue is derived from the shape, not walked
    if (def.is_config && !def.build_choice) configs.push_back(&def);
  std::vector<KernelSpec> problems;
  for (const KernelSpec& s : enumerate_specs(f)) {
    KernelSpec p{"gemm", {}};
    for (const ParamDef& def : f.params)
      if (!def.is_config) p.params[def.name] = s.params.at(def.name);
    if (problems.empty() || !(problems.back() == p)) problems.push_back(p);
  }
  ASSERT_GT(problems.size(), 100u);
  std::size_t compared = 0;
  for (std::size_t i = 0; i < problems.size(); i += 23) {
    std::vector<KernelSpec> expected;
    std::vector<std::size_t> at(configs.size(), 0);
    for (bool more = true; more;) {
      KernelSpec s = problems[i];
      for (std::size_t j = 0; j < configs.size(); ++j)  // held absent at its default (swap_ab 0)
        if (!elided(*configs[j], configs[j]->allowed[at[j]]))
          s.params[configs[j]->name] = configs[j]->allowed[at[j]];
      if (f.check(s).empty()) expected.push_back(s);
      std::size_t j = configs.size();
      while (j > 0 && ++at[j - 1] == configs[j - 1]->allowed.size()) at[--j] = 0;
      more = j > 0;
    }
    const std::vector<KernelSpec> walked = enumerate_configs(f, problems[i]);
    ASSERT_FALSE(walked.empty()) << spec_to_json(problems[i]);
    EXPECT_EQ(walked, expected) << spec_to_json(problems[i]);
    compared += walked.size();
  }
  EXPECT_GT(compared, 10000u);
}

// for_each_spec promises problems outermost in declared order; that is one depth-first walk
// only while every family declares its problem parameters before its config parameters.
TEST(FamilySpaces, ProblemParametersComeFirst) {
  for (const FamilyDef* f : all_families()) {
    bool seen_config = false;
    for (const ParamDef& def : f->params) {
      EXPECT_FALSE(seen_config && !def.is_config) << f->name << "." << def.name;
      seen_config |= def.is_config;
    }
  }
}

TEST(GemmSpecSample, SpreadSampleCoversTheExtremes) {
  const std::vector<KernelSpec> sample = spread_sample(gemm_family(), 60);
  EXPECT_GE(sample.size(), 60u);
  std::size_t extras = 0;  // two extremes per config parameter, each value of a problem parameter
  for (const ParamDef& def : gemm_family().params) extras += def.is_config ? 2 : def.allowed.size();
  EXPECT_LE(sample.size(), 60u + extras);
  EXPECT_EQ(sample, spread_sample(gemm_family(), 60));  // fixed
  std::set<std::string> names;
  std::set<std::int64_t> block_m, block_n, stages, group_m;
  std::map<std::string, std::set<ParamValue>> seen;  // every parameter's values in the sample
  std::set<std::string> c2m_scales, c2n_scales;
  for (const KernelSpec& s : sample) {
    ASSERT_NO_THROW(validate_spec(s));
    names.insert(spec_name(s));
    block_m.insert(s.i("block_m"));
    block_n.insert(s.i("block_n"));
    stages.insert(s.i("stages"));
    group_m.insert(s.i("group_m"));
    for (const auto& [key, value] : s.params) seen[key].insert(value);
    // A cluster only where the restated rules allow one, and the name says so.
    const int cm = static_cast<int>(s.i("cluster_m")), cn = static_cast<int>(s.i("cluster_n"));
    EXPECT_TRUE(cluster_ok(s.s("scale"), static_cast<int>(s.i("block_m")), static_cast<int>(s.i("block_n")), cm, cn))
        << spec_name(s);
    EXPECT_EQ(spec_name(s).ends_with("_c2m"), cm == 2) << spec_name(s);
    EXPECT_EQ(spec_name(s).ends_with("_c2n"), cn == 2) << spec_name(s);
    if (cm == 2) c2m_scales.insert(s.s("scale"));
    if (cn == 2) c2n_scales.insert(s.s("scale"));
  }
  EXPECT_EQ(names.size(), sample.size()) << "duplicates in the sample";
  for (std::int64_t v : {64, 256}) EXPECT_TRUE(block_m.count(v)) << "block_m " << v;
  // 256 columns: precise accumulation in two column halves (fast accumulation stops at 240).
  for (std::int64_t v : {16, 256}) EXPECT_TRUE(block_n.count(v)) << "block_n " << v;
  for (std::int64_t v : {2, 8}) EXPECT_TRUE(stages.count(v)) << "stages " << v;
  for (std::int64_t v : {1, 16}) EXPECT_TRUE(group_m.count(v)) << "group_m " << v;
  // Every value of every problem parameter (scale modes, output types, formats, bias, accumulation)
  // and both values of each cluster parameter: single CTAs and 2-CTA clusters along M and along N.
  for (const ParamDef& def : gemm_family().params) {
    if (def.is_config && def.name.rfind("cluster_", 0) != 0) continue;
    EXPECT_EQ(seen[def.name], std::set<ParamValue>(def.allowed.begin(), def.allowed.end())) << def.name;
  }
  EXPECT_EQ(seen["scale"].size(), 4u);
  EXPECT_EQ(seen["out"].size(), 3u);
  EXPECT_EQ(seen["accum"].size(), 2u);
  EXPECT_EQ(seen["cluster_m"], (std::set<ParamValue>{std::int64_t{1}, std::int64_t{2}}));
  EXPECT_EQ(seen["cluster_n"], (std::set<ParamValue>{std::int64_t{1}, std::int64_t{2}}));
  EXPECT_FALSE(c2m_scales.empty());
  EXPECT_FALSE(c2n_scales.empty());
  EXPECT_FALSE(c2m_scales.count("group") || c2n_scales.count("group"));
}

// ---- the heuristic default -----------------------------------------------------------------


std::vector<GemmProblem> gemm_problems() {
  std::vector<GemmProblem> out;
  for (const ParamValue& a : param("a_format").allowed)
    for (const ParamValue& b : param("b_format").allowed)
      for (const ParamValue& o : param("out").allowed)
        for (const ParamValue& sc : param("scale").allowed)
          for (const ParamValue& bias : param("bias").allowed)
            for (const ParamValue& accum : param("accum").allowed) {
              const std::string scale = std::get<std::string>(sc);
              if (a == b && std::get<std::string>(a) == "e5m2") continue;
              if (std::get<std::string>(accum) == "fast" && (scale == "block" || scale == "group"))
                continue;
              out.push_back({*parse_fp8_format(std::get<std::string>(a)),
                             *parse_fp8_format(std::get<std::string>(b)),
                             *parse_dtype(std::get<std::string>(o)), *parse_scale_mode(scale),
                             std::get<std::int64_t>(bias) == 1,
                             std::get<std::string>(accum) == "fast"});
            }
  return out;
}

// DeepSeek-V3's shapes plus decode-sized and narrow ones.
std::vector<Shape> default_shapes() {
  std::vector<Shape> shapes = deepseek_shapes();
  if (shapes.empty()) return shapes;
  EXPECT_EQ(shapes.size(), 19u);
  for (std::int64_t m : {1, 7, 65})
    for (std::int64_t n : {16, 24}) shapes.push_back({m, n, 7168});
  return shapes;
}

// The heuristic's widest tile: what fits both 64- and 128-row tiles without column halves, except
// block scaling without bias, which takes 256 columns in halves.
int heuristic_cap(const GemmProblem& p) {
  const std::string scale(to_string(p.scale)), accum = p.fast_accum ? "fast" : "precise";
  if (p.scale == ScaleMode::block && !p.fast_accum && !p.bias) return 256;
  int cap = 0;
  for (int bn = 16; bn <= 256; bn += 8)
    if (chunks(scale, accum, 128, bn) == 1 && accumulators(scale, accum, 128, bn) <= max_accumulators(scale, accum, 128) &&
        accumulators(scale, accum, 64, bn) <= max_accumulators(scale, accum, 64))
      cap = bn;
  return cap;
}

// The default for problem p on shape sh must be valid, solve p, use 64-row tiles for M <= 64, fit
// `smem` bytes, and take as many stages as fit (up to 6, 12 for the streaming decode tiles).
// Returns its config.
GemmConfig check_default(const GemmProblem& p, const Shape& sh, int sms, int smem) {
  SCOPED_TRACE(fmt::format("{}x{}x{} on {} SMs with {} bytes, problem {}{} {} {}{}{}", sh.m, sh.n,
                           sh.k, sms, smem, to_string(p.a_format), to_string(p.b_format),
                           to_string(p.out), to_string(p.scale), p.bias ? " bias" : "",
                           p.fast_accum ? " fast" : ""));
  KernelSpec s;
  try {
    s = default_gemm_spec(p, sh.m, sh.n, sh.k, sms, smem);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "default_gemm_spec threw: " << e.what();
    return {};
  }
  EXPECT_NO_THROW(validate_spec(s));
  const GemmProblem back = gemm_problem_of(s);
  EXPECT_TRUE(back.a_format == p.a_format && back.b_format == p.b_format && back.out == p.out &&
              back.scale == p.scale && back.bias == p.bias && back.fast_accum == p.fast_accum);
  const GemmConfig c = gemm_config_of(s);
  // Up to 16 rows of A: swapped operands, M on the narrowest multiple of 8 that holds it, N on 64-
  // or 128-row tiles, 16 stages or as many as fit.
  EXPECT_EQ(c.swap_ab, sh.m <= kGemmSwapMaxM ? 1 : 0) << spec_name(s);
  if (c.swap_ab) {
    EXPECT_EQ(c.block_n, (sh.m + 7) / 8 * 8) << spec_name(s);
    EXPECT_TRUE(c.block_m == 64 || c.block_m == 128) << spec_name(s);
    EXPECT_LE(gemm_geometry(p, c).smem_bytes, smem) << spec_name(s);
    GemmConfig deeper = c;
    ++deeper.stages;
    EXPECT_TRUE(c.stages == 16 || gemm_geometry(p, deeper).smem_bytes > smem) << spec_name(s);
    return c;
  }
  // 17-128 rows over 48 K blocks or more: of the 64-row tiles a multiple of 8 from 16 to 64 wide
  // (16, 32 or 64 with block scaling; up to 128 with fast accumulation), the width whose tiles
  // come closest to the SM count in one wave, if they fill 3/4 of it; 16 stages (12 from 64
  // columns) or as many as fit; K in one range.
  if (sh.m <= 128 && (sh.k + 127) / 128 >= 48) {
    int bn = 0;
    std::int64_t most = 0;
    for (int w = 16; w <= (p.fast_accum ? 128 : 64); w += 8) {
      if (p.scale == ScaleMode::block && 128 % w != 0) continue;
      const std::int64_t tiles = (sh.m + 63) / 64 * ((sh.n + w - 1) / w);
      if (tiles <= sms && 4 * tiles >= 3 * sms && tiles >= most) {
        bn = w;
        most = tiles;
      }
    }
    if (bn != 0) {
      EXPECT_EQ(c.block_m, 64) << spec_name(s);
      EXPECT_EQ(c.block_n, bn) << spec_name(s);
      GemmConfig deeper = c;
      ++deeper.stages;
      EXPECT_LE(c.stages, bn >= 64 ? 12 : 16) << spec_name(s);
      EXPECT_TRUE(c.stages == (bn >= 64 ? 12 : 16) || gemm_geometry(p, deeper).smem_bytes > smem)
          << spec_name(s);
      EXPECT_EQ(gemm_split_k(sh.m, sh.n, sh.k, c, sms), 1) << spec_name(s);
      return c;
    }
  }
  if (sh.m <= 64) EXPECT_EQ(c.block_m, 64);
  // The widest tile the registers of a 64- or 128-row tile allow (240 columns with fast
  // accumulation, 160 with group scaling, 208 otherwise), and at most 160 where K has 4 or fewer
  // blocks of 128 (the epilogue dominates) unless the tile goes in column halves or stages D in
  // whole panels (128x192).
  EXPECT_LE(c.block_n, heuristic_cap(p)) << spec_name(s);
  if ((sh.k + 127) / 128 <= 4 && gemm_geometry(p, c).chunks == 1 &&
      gemm_geometry(p, c).panel_bytes != 128)
    EXPECT_LE(c.block_n, 160) << spec_name(s);
  EXPECT_LE(gemm_geometry(p, c).smem_bytes, smem) << spec_name(s);
  GemmConfig more = c;
  ++more.stages;
  // Up to 6 stages, or 12 for 64-row tiles streaming a long K in one wave without split-K.
  const bool streaming = sh.m < 64 && c.block_n <= 64 && (sh.k + 127) / 128 >= 16 &&
                         (sh.m + 63) / 64 * ((sh.n + c.block_n - 1) / c.block_n) <= sms &&
                         gemm_split_k(sh.m, sh.n, sh.k, c, sms) == 1;
  EXPECT_TRUE(c.stages == (streaming ? 12 : 6) || gemm_geometry(p, more).smem_bytes > smem)
      << spec_name(s) << ": a stage more would fit";
  EXPECT_LE(c.stages, streaming ? 12 : 6) << spec_name(s);
  return c;
}

TEST(GemmSpecDefault, ValidFittingAndSmallTilesForSmallM) {
  const std::vector<GemmProblem> problems = gemm_problems();
  // 3 format pairs x 3 outputs x bias x (4 scale modes precise + tensor and rowwise fast).
  ASSERT_EQ(problems.size(), 108u);
  const std::vector<Shape> shapes = default_shapes();
  ASSERT_FALSE(shapes.empty()) << "no shapes from " << test::kDeepseekShapesCsv;
  std::map<std::string, int> widest;  // by scale mode and accumulation
  for (const GemmProblem& p : problems)
    for (const Shape& sh : shapes)
      for (int sms : {132, 114}) {
        const GemmConfig c = check_default(p, sh, sms, kSmemLimit);
        if (::testing::Test::HasFailure()) return;
        // The struct default's limit is H100/H200's.
        EXPECT_EQ(default_gemm_spec(p, sh.m, sh.n, sh.k, sms), make_gemm_spec(p, c));
        int& w = widest[fmt::format("{} {}", to_string(p.scale), p.fast_accum ? "fast" : "precise")];
        w = std::max(w, c.block_n);
      }
  // The caps: 240 columns (fast accumulation), 160 (group scaling), 208 (tensor and row-wise
  // scaling), 256 (block). On DeepSeek-V3's shapes group scaling's is reached, and per row's with
  // a bias (no 256-row tile for it); under 2048 rows the shapes take narrower tiles, and from
  // there on, over 16 K blocks, the other modes (with a bias too) take 256x128
  // (TallTilesAtLargeMAndLongK), so 192 and 224 columns are their widest.
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false, true}), 240);
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::group}), 160);
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block}), 256);
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, true}), 208);
  const std::map<std::string, int> expected = {{"tensor precise", 192},  {"tensor fast", 224},
                                               {"rowwise precise", 208}, {"rowwise fast", 240},
                                               {"block precise", 192},   {"group precise", 160}};
  EXPECT_EQ(widest, expected);
  // e5m2 x e5m2 has no kernel.
  invalid_message([] {
    (void)default_gemm_spec({Fp8Format::e5m2, Fp8Format::e5m2}, 4096, 4096, 4096);
  });
}

// With less shared memory (100000 bytes) the default must still fit: fewer stages, or smaller tiles
// where even two stages of the usual ones (plus the staged tile of D) do not fit.
TEST(GemmSpecDefault, FitsASmallerSharedMemoryLimit) {
  const std::vector<Shape> shapes = default_shapes();
  ASSERT_FALSE(shapes.empty()) << "no shapes from " << test::kDeepseekShapesCsv;
  int shrunk = 0;
  for (const GemmProblem& p : gemm_problems())
    for (const Shape& sh : shapes) {
      const GemmConfig c = check_default(p, sh, 132, 100000);
      if (::testing::Test::HasFailure()) return;
      const GemmConfig roomy =
          gemm_config_of(default_gemm_spec(p, sh.m, sh.n, sh.k, 132, kSmemLimit));
      if (roomy.block_n == c.block_n && roomy.block_m == c.block_m && roomy.stages > c.stages)
        ++shrunk;
    }
  EXPECT_GT(shrunk, 0) << "a 100000-byte limit never cut the stage count";
}

// Fewer than 64 rows in one wave of 64x64 (or narrower) tiles without split-K over a long K: 12
// stages (memory-bound, as many bytes in flight as fit); with split-K, at short K, with wider or
// 128-row tiles: 6. Up to 128 rows over 48 K blocks or more: a wave of 64x64, 64x32 or 64x16
// tiles, 12 or 16 stages.
TEST(GemmSpecDefault, StreamingDecodeTilesTakeTwelveStages) {
  const GemmProblem p;  // block scaling, bf16 out
  auto stages = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return gemm_config_of(default_gemm_spec(p, m, n, k, 132, 232448)).stages;
  };
  EXPECT_EQ(stages(20, 6144, 4096), 12);  // up to 16 rows the operands swap (GemmSwap tests)
  EXPECT_EQ(stages(37, 5120, 32768), 12);
  EXPECT_EQ(stages(64, 5120, 8192), 6);  // whole 64-row tiles
  EXPECT_EQ(stages(24, 5120, 25600), 12);
  EXPECT_EQ(stages(64, 2048, 768), 6);    // 6 K blocks
  EXPECT_EQ(stages(64, 9216, 4096), 6);   // 64x80 tiles
  EXPECT_EQ(stages(37, 2048, 4096), 6);   // 32 K blocks: split-K
  EXPECT_EQ(stages(128, 7168, 16384), 6);  // no wave of 64-row tiles: 128x64 tiles
  auto tile = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    const GemmConfig c = gemm_config_of(default_gemm_spec(p, m, n, k, 132, 232448));
    return fmt::format("{}x{} s{} split {}", c.block_m, c.block_n, c.stages,
                       gemm_split_k(m, n, k, c, 132));
  };
  EXPECT_EQ(tile(64, 2112, 7168), "64x16 s16 split 1");   // 132 tiles
  EXPECT_EQ(tile(128, 2112, 7168), "64x32 s16 split 1");  // 132 tiles
  EXPECT_EQ(tile(64, 4096, 7168), "64x32 s16 split 1");   // 128 tiles
  EXPECT_EQ(tile(128, 4096, 7168), "64x64 s12 split 1");  // 128 tiles
  EXPECT_EQ(tile(64, 7168, 16384), "64x64 s12 split 1");  // 112 tiles
  EXPECT_EQ(tile(100, 2112, 7168), "64x32 s16 split 1");  // ragged M: 2 tile rows
  // Per tensor (fast accumulation too), widths that are not divisors of 128 as well: 64x5120x8192
  // takes 128 tiles of 40 columns, where block scaling finds no width (80 tiles of 64, 160 of 32).
  GemmProblem tensor, fast;
  tensor.scale = fast.scale = ScaleMode::tensor;
  fast.fast_accum = true;
  auto tile_of = [&](const GemmProblem& q, std::int64_t m, std::int64_t n, std::int64_t k) {
    const GemmConfig c = gemm_config_of(default_gemm_spec(q, m, n, k, 132, 232448));
    return fmt::format("{}x{} s{}", c.block_m, c.block_n, c.stages);
  };
  EXPECT_EQ(tile_of(tensor, 64, 5120, 8192), "64x40 s16");
  EXPECT_EQ(tile_of(fast, 64, 5120, 8192), "64x40 s16");
  EXPECT_EQ(tile_of(fast, 128, 2112, 7168), "64x32 s16");
  EXPECT_EQ(tile_of(tensor, 64, 7168, 16384), "64x56 s14");  // 128 tiles; 14 stages fit
  // A GPU with less shared memory: as deep as fits.
  const int small = gemm_config_of(default_gemm_spec(p, 20, 6144, 4096, 132, 100000)).stages;
  EXPECT_LT(small, 12);
  EXPECT_GE(small, 2);
}

// Split-K (decode-sized M): enough K ranges to occupy the SMs, none empty, each at least 4 K blocks
// long where K is cut at all; large problems and short K are never split.
TEST(GemmSpecSplitK, RangesCoverKAndFillTheMachine) {
  const GemmConfig c64{64, 128, 4, 8}, c128{128, 128, 4, 8};
  EXPECT_EQ(gemm_split_k(4096, 7168, 7168, c128, 132), 1);  // 1792 tiles
  EXPECT_EQ(gemm_split_k(64, 7168, 1024, c64, 132), 2);     // 56 tiles, 8 K blocks: two ranges of 4
  EXPECT_EQ(gemm_split_k(64, 7168, 16384, c64, 132), 2);    // 56 tiles on 132 SMs
  EXPECT_EQ(gemm_split_k(1, 16, 7168, c64, 132), 14);       // one tile, 56 K blocks of at least 4
  EXPECT_EQ(gemm_split_k(1, 16, 896, c64, 132), 1);         // 7 K blocks: too short to split
  EXPECT_EQ(gemm_split_k(1, 16, 1 << 20, c64, 132), 16);    // at most 16 ranges
  for (std::int64_t m : {1, 16, 64, 65, 128, 300, 4096})
    for (std::int64_t n : {16, 128, 1000, 2112, 7168})
      for (std::int64_t k : {128, 1024, 1040, 2048, 7168, 16384, 100000})
        for (const GemmConfig& c : {c64, c128, GemmConfig{256, 40, 2, 1}})
          for (int sms : {1, 114, 132}) {
            SCOPED_TRACE(
                fmt::format("{}x{}x{}, {}x{} tiles, {} SMs", m, n, k, c.block_m, c.block_n, sms));
            const int splits = gemm_split_k(m, n, k, c, sms);
            ASSERT_GE(splits, 1);
            ASSERT_LE(splits, 16);
            const std::int64_t tiles =
                ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
            const std::int64_t kb = (k + 127) / 128, per = (kb + splits - 1) / splits;
            if (splits == 1) continue;
            EXPECT_LE(tiles * splits, sms);     // one wave
            EXPECT_GE(per, 4);                  // each range fills the pipeline
            EXPECT_LT((splits - 1) * per, kb);  // the last range is not empty
            EXPECT_LE(tiles * 2, sms);          // only when tiles leave most SMs idle
          }
}

}  // namespace
}  // namespace fp8jit
