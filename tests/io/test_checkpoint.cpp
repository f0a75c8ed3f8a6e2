// Checkpoint files at 1, 2 and 4 ranks: a collective write where ranks own different slabs of
// the same tensors (rows, columns, q/k/v row blocks, padded rows, a replicated tensor written by
// one rank, a tensor only the last "stage" holds, a tied copy that is never written), read back
// bit for bit into other splits; the file's attributes, crc32s and `latest`; keep_last; and the
// errors: corruption, truncation, an unfinished file, a wrong shape, owners that miss elements.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/backend.h"
#include "framework/check.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/checkpoint_writer.h"
#include "framework/io/crc32.h"
#include "framework/io/hdf5_util.h"
#include "framework/parameter.h"
#include "framework/rng.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using gpt::expect_error;
using gpt::Slab;
using gpt::world_rank;
using gpt::world_size;

// One directory shared by all ranks (rank 0 creates it), removed at the end.
class SharedTempDir {
 public:
  SharedTempDir() {
    std::string path(512, '\0');
    if (world_rank() == 0) {
      std::string pattern = (fs::temp_directory_path() / "gpt_io_ckpt_XXXXXX").string();
      GPT_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
      path.replace(0, pattern.size(), pattern);
    }
    MPI_Bcast(path.data(), static_cast<int>(path.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = path.c_str();
  }
  ~SharedTempDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (world_rank() == 0) fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// The logical value of element i of a tensor: mostly normals, and every 13th a raw 32-bit
// pattern (NaNs, infinities, denormals included) so the round trip is checked bit for bit.
float expected_value(const std::string& name, const std::string& which, int64_t i) {
  gpt::CounterRng rng(77, name + "/" + which);
  if (i % 13 == 0) {
    const auto bits = static_cast<uint32_t>(rng.bits(static_cast<uint64_t>(i)));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  return rng.normal(static_cast<uint64_t>(i));
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

constexpr float kGarbage = -12345.5f;
const std::vector<std::string> kStates = {"exp_avg", "exp_avg_sq"};

// What one rank holds of one parameter.
struct Holding {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<Slab> slabs;
  int64_t padding = 0;  // extra storage after the slabs
  bool owned = false;
  bool tied_copy = false;
};

Slab make_slab(std::vector<int64_t> start, std::vector<int64_t> count, int64_t offset) {
  Slab s;
  s.start = std::move(start);
  s.count = std::move(count);
  s.local_offset = offset;
  return s;
}

int64_t part_begin(int64_t n, int part, int parts) {
  return n * part / parts;
}

// The layout used for writing: every kind of split a real model has.
std::vector<Holding> write_layout(int rank, int size) {
  std::vector<Holding> out;
  const int64_t r0 = part_begin(8, rank, size), r1 = part_begin(8, rank + 1, size);
  out.push_back({"rows", {8, 6}, {make_slab({r0, 0}, {r1 - r0, 6}, 0)}, 0, true, false});
  const int64_t c0 = part_begin(6, rank, size), c1 = part_begin(6, rank + 1, size);
  out.push_back({"cols", {8, 6}, {make_slab({0, c0}, {8, c1 - c0}, 0)}, 0, true, false});
  out.push_back({"replicated", {5}, {make_slab({0}, {5}, 0)}, 0, rank == 0, false});
  // c_attn-like: this rank's rows of each of q, k and v, stored one block after another.
  Holding qkv{"qkv", {12, 4}, {}, 0, true, false};
  const int64_t q0 = part_begin(4, rank, size), q1 = part_begin(4, rank + 1, size);
  for (int64_t part = 0; part < 3; ++part)
    qkv.slabs.push_back(make_slab({part * 4 + q0, 0}, {q1 - q0, 4}, part * (q1 - q0) * 4));
  out.push_back(qkv);
  // Vocabulary-like: 10 logical rows padded to 12, split evenly; the last rank's storage runs
  // past the logical rows.
  const int64_t rows = (12 + size - 1) / size;  // 12 padded rows or more, evenly split
  const int64_t p0 = rank * rows, p1 = std::min<int64_t>(p0 + rows, 10);
  Holding padded{"padded", {10, 3}, {}, 0, true, false};
  if (p1 > p0) padded.slabs.push_back(make_slab({p0, 0}, {p1 - p0, 3}, 0));
  padded.padding = (rows - std::max<int64_t>(p1 - p0, 0)) * 3;
  out.push_back(padded);
  if (rank == size - 1)
    out.push_back({"last_stage", {3, 2}, {make_slab({0, 0}, {3, 2}, 0)}, 0, true, false});
  if (rank == 0) out.push_back({"wte", {4, 2}, {make_slab({0, 0}, {4, 2}, 0)}, 0, true, false});
  if (size > 1 && rank == size - 1)  // the last stage's tied copy: garbage, never written
    out.push_back({"wte", {4, 2}, {make_slab({0, 0}, {4, 2}, 0)}, 0, false, true});
  return out;
}

const std::vector<std::pair<std::string, std::vector<int64_t>>> kAllParams = {
    {"rows", {8, 6}},    {"cols", {8, 6}},       {"replicated", {5}}, {"qkv", {12, 4}},
    {"padded", {10, 3}}, {"last_stage", {3, 2}}, {"wte", {4, 2}}};

// Reading layouts: every rank holds every parameter, split by rows in reverse rank order, or
// whole; both with padding after the slabs.
std::vector<Holding> read_layout(int rank, int size, bool whole) {
  std::vector<Holding> out;
  for (const auto& [name, shape] : kAllParams) {
    Holding h{name, shape, {}, 7, false, false};
    std::vector<int64_t> start(shape.size(), 0), count = shape;
    if (!whole) {
      const int part = size - 1 - rank;
      start[0] = part_begin(shape[0], part, size);
      count[0] = part_begin(shape[0], part + 1, size) - start[0];
    }
    h.slabs.push_back(make_slab(start, count, 0));
    out.push_back(h);
  }
  return out;
}

struct TestModel {
  std::unique_ptr<gpt::Backend> backend = gpt::make_cpu_backend(1);
  std::unique_ptr<gpt::ParameterStore> store;
  std::set<const gpt::Parameter*> owned;
  gpt::WriteOwner owner() const {
    return [this](const gpt::Parameter& p) { return owned.count(&p) > 0; };
  }
};

// Builds a store for the layout. With fill, owned slabs get the expected values and everything
// else garbage (so a wrongly written copy shows); without, all storage is garbage.
std::unique_ptr<TestModel> build(const std::vector<Holding>& layout, bool with_states, bool fill) {
  auto model = std::make_unique<TestModel>();
  model->store = std::make_unique<gpt::ParameterStore>(*model->backend);
  std::vector<gpt::Parameter*> params;
  for (const Holding& h : layout) {
    gpt::ParameterSpec spec;
    spec.name = h.name;
    spec.shape = h.shape;
    spec.slabs = h.slabs;
    spec.local_numel = h.padding;
    for (const Slab& s : h.slabs) spec.local_numel += s.numel();
    spec.tied_copy = h.tied_copy;
    params.push_back(&model->store->add(spec));
    if (h.owned) model->owned.insert(params.back());
  }
  model->store->allocate();
  if (with_states)
    for (const std::string& s : kStates) model->store->add_state(s);
  for (gpt::Parameter* p : params) {
    auto fill_buffer = [&](float* dst, const std::string& which) {
      std::vector<float> host(static_cast<size_t>(p->local_numel), kGarbage);
      if (fill && model->owned.count(p)) {
        for (const Slab& s : p->slabs) {
          std::vector<int64_t> logical = gpt::slab_logical_indices(s, p->shape);
          for (size_t i = 0; i < logical.size(); ++i)
            host[static_cast<size_t>(s.local_offset) + i] =
                expected_value(p->name, which, logical[i]);
        }
      }
      if (!host.empty())
        model->backend->copy_from_host(dst, host.data(), host.size() * sizeof(float));
    };
    fill_buffer(p->value, "value");
    if (with_states)
      for (const std::string& s : kStates) fill_buffer(model->store->state(s) + p->offset, s);
  }
  return model;
}

// Every slab element equals the expected bits and all other storage is zero.
void expect_loaded(TestModel& model, bool with_states) {
  for (gpt::Parameter& p : model.store->params()) {
    auto check = [&](const float* src, const std::string& which) {
      std::vector<float> host(static_cast<size_t>(p.local_numel));
      model.backend->copy_to_host(host.data(), src, host.size() * sizeof(float));
      std::vector<bool> covered(host.size(), false);
      int mismatches = 0;
      for (const Slab& s : p.slabs) {
        std::vector<int64_t> logical = gpt::slab_logical_indices(s, p.shape);
        for (size_t i = 0; i < logical.size(); ++i) {
          const size_t at = static_cast<size_t>(s.local_offset) + i;
          covered[at] = true;
          if (bits_of(host[at]) != bits_of(expected_value(p.name, which, logical[i]))) ++mismatches;
        }
      }
      EXPECT_EQ(mismatches, 0) << p.name << " " << which << " on rank " << world_rank();
      for (size_t i = 0; i < host.size(); ++i)
        if (!covered[i]) {
          EXPECT_EQ(bits_of(host[i]), 0u) << p.name << " padding " << i;
        }
    };
    check(p.value, "value");
    if (with_states)
      for (const std::string& s : kStates) check(model.store->state(s) + p.offset, s);
  }
}

gpt::CheckpointMeta test_meta(int64_t step) {
  gpt::CheckpointMeta meta;
  meta.step = step;
  meta.consumed_samples = step * 32;
  meta.seed = 0xFEDCBA9876543210ull;  // above INT64_MAX: stored as its int64 bit pattern
  meta.config_json = R"({"n_layer": 2, "note": "quotes \" and unicode \u00e9"})";
  meta.tokenizer = "bytes";
  meta.layout = "tp=1 dp=" + std::to_string(world_size()) + " pp=1";
  return meta;
}

gpt::OptimizerMeta test_optimizer() {
  gpt::OptimizerMeta opt;
  opt.type = "adamw";
  opt.hyperparameters = {
      {"lr", 3e-4}, {"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"weight_decay", 0.1}};
  opt.step = 17;
  opt.state_names = kStates;
  return opt;
}

std::string write_test_checkpoint(const std::string& dir, int64_t step, bool with_optimizer,
                                  int keep_last = 0) {
  auto model = build(write_layout(world_rank(), world_size()), with_optimizer, true);
  gpt::OptimizerMeta opt = test_optimizer();
  return gpt::write_checkpoint(dir, test_meta(step), with_optimizer ? &opt : nullptr, *model->store,
                               model->owner(), MPI_COMM_WORLD, keep_last);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---------------------------------------------------------------------------------------------

TEST(Checkpoint, RoundTripBitForBitIntoOtherSplits) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.sub("ckpt"), 7, true);
  EXPECT_EQ(path, dir.sub("ckpt") + "/step-00000007.h5");
  for (bool whole : {false, true}) {
    auto model = build(read_layout(world_rank(), world_size(), whole), true, false);
    auto reader = gpt::open_checkpoint(path, MPI_COMM_WORLD);
    gpt::load_checkpoint(*reader, *model->store, true);
    expect_loaded(*model, true);
  }
  // The writing layout reads its own file back too (q/k/v slabs, padded rows, tied copy).
  auto same = build(write_layout(world_rank(), world_size()), true, false);
  gpt::load_checkpoint(*gpt::open_checkpoint(path, MPI_COMM_WORLD), *same->store, true);
  expect_loaded(*same, true);
  // Weights only: the optimizer state stays as it was.
  auto weights = build(read_layout(world_rank(), world_size(), false), false, false);
  gpt::load_checkpoint(*gpt::open_checkpoint(path, MPI_COMM_WORLD), *weights->store, false);
  expect_loaded(*weights, false);
}

TEST(Checkpoint, MetadataAndOptimizerRoundTrip) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.path(), 3, true);
  gpt::CheckpointReader reader(path);
  const gpt::CheckpointMeta want = test_meta(3);
  EXPECT_EQ(reader.meta().step, 3);
  EXPECT_EQ(reader.meta().consumed_samples, 96);
  EXPECT_EQ(reader.meta().seed, want.seed);
  EXPECT_EQ(reader.meta().config_json, want.config_json);
  EXPECT_EQ(reader.meta().tokenizer, "bytes");
  EXPECT_EQ(reader.meta().layout, want.layout);
  EXPECT_TRUE(reader.has_optimizer());
  gpt::OptimizerMeta opt = reader.optimizer();
  EXPECT_EQ(opt.type, "adamw");
  EXPECT_EQ(opt.step, 17);
  EXPECT_EQ(opt.state_names, kStates);
  const std::vector<std::pair<std::string, double>> sorted = {
      {"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"lr", 3e-4}, {"weight_decay", 0.1}};
  EXPECT_EQ(opt.hyperparameters, sorted);
  EXPECT_TRUE(reader.has("/model/qkv"));
  EXPECT_TRUE(reader.has("/optimizer/last_stage/exp_avg_sq"));
  EXPECT_FALSE(reader.has("/model/nothing"));
  EXPECT_EQ(reader.shape("/model/padded"), (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(reader.datasets().size(), kAllParams.size() * 3);
}

TEST(Checkpoint, FileIsValidForOtherTools) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.path(), 12, true);
  if (world_rank() != 0) return;
  EXPECT_EQ(read_text(dir.sub("latest")), "step-00000012.h5\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(dir.sub("latest.tmp")));
  gpt::h5::Handle file(GPT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const hid_t root = file.id();
  EXPECT_EQ(gpt::h5::read_string_attribute(root, "format"), "gpt-train-checkpoint");
  EXPECT_EQ(gpt::h5::read_int64_attribute(root, "format_version"), 2);
  EXPECT_TRUE(gpt::h5::read_int64_attribute(root, "metadata_crc32").has_value());
  EXPECT_EQ(gpt::h5::read_int64_attribute(root, "complete"), 1);
  EXPECT_EQ(gpt::h5::read_int64_attribute(root, "step"), 12);
  EXPECT_EQ(gpt::h5::read_int64_attribute(root, "consumed_samples"), 12 * 32);
  EXPECT_EQ(gpt::h5::read_int64_attribute(root, "seed"),
            static_cast<int64_t>(0xFEDCBA9876543210ull));
  for (const char* name : {"config", "tokenizer", "layout"})
    EXPECT_TRUE(gpt::h5::read_string_attribute(root, name).has_value()) << name;
  // complete is the last attribute written (creation order is not tracked, so check that the
  // flag is there and every other piece is complete around it).
  for (const auto& [name, shape] : kAllParams) {
    for (const std::string& ds : {"/model/" + name, "/optimizer/" + name + "/exp_avg",
                                  "/optimizer/" + name + "/exp_avg_sq"}) {
      gpt::h5::Handle dataset(GPT_H5_CHECK(H5Dopen2(root, ds.c_str(), H5P_DEFAULT)));
      EXPECT_EQ(gpt::h5::dataset_shape(dataset.id()), shape) << ds;
      gpt::h5::Handle plist(GPT_H5_CHECK(H5Dget_create_plist(dataset.id())));
      EXPECT_EQ(H5Pget_layout(plist.id()), H5D_CONTIGUOUS) << ds;
      // The crc32 is of the float32 bytes in row-major order.
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      std::vector<float> data(static_cast<size_t>(numel));
      GPT_H5_CHECK(
          H5Dread(dataset.id(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
      EXPECT_EQ(gpt::h5::read_int64_attribute(dataset.id(), "crc32"),
                gpt::crc32(data.data(), data.size() * sizeof(float)))
          << ds;
    }
  }
  gpt::h5::Handle opt(GPT_H5_CHECK(H5Gopen2(root, "/optimizer", H5P_DEFAULT)));
  EXPECT_EQ(gpt::h5::read_string_attribute(opt.id(), "type"), "adamw");
  EXPECT_EQ(gpt::h5::read_int64_attribute(opt.id(), "step"), 17);
  EXPECT_EQ(gpt::h5::read_double_attribute(opt.id(), "lr"), 3e-4);
}

TEST(Checkpoint, H5pyReadsItAndAgreesOnCrc) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.path(), 5, true);
  if (world_rank() != 0) return;
  std::string python;
  for (std::string candidate : {"/usr/bin/python3", "python3"})
    if (python.empty() &&
        std::system((candidate + " -c 'import h5py' > /dev/null 2>&1").c_str()) == 0)
      python = candidate;
  if (python.empty()) GTEST_SKIP() << "python3 with h5py not available";
  const std::string script = dir.sub("check.py");
  std::ofstream(script) << "import sys, zlib, h5py, numpy as np\n"
                           "f = h5py.File(sys.argv[1], 'r')\n"
                           "assert f.attrs['complete'] == 1\n"
                           "assert f.attrs['format'] == 'gpt-train-checkpoint'\n"
                           "names = []\n"
                           "f.visititems(lambda n, o: names.append(n) if isinstance(o, "
                           "h5py.Dataset) else None)\n"
                           "assert len(names) == 21, names\n"
                           "for n in names:\n"
                           "    d = f[n]\n"
                           "    assert d.dtype == np.float32\n"
                           "    c = zlib.crc32(np.ascontiguousarray(d[...]).astype('<f4')"
                           ".tobytes())\n"
                           "    assert c == int(d.attrs['crc32']), n\n"
                           "assert f['model/qkv'].shape == (12, 4)\n"
                           "print('ok')\n";
  EXPECT_EQ(std::system((python + " " + script + " " + path).c_str()), 0);
}

TEST(Checkpoint, KeepLastRemovesOlderFiles) {
  SharedTempDir dir;
  for (int64_t step : {1, 2, 3, 4}) write_test_checkpoint(dir.path(), step, false, 2);
  if (world_rank() == 0) {
    EXPECT_FALSE(fs::exists(dir.sub("step-00000001.h5")));
    EXPECT_FALSE(fs::exists(dir.sub("step-00000002.h5")));
    EXPECT_TRUE(fs::exists(dir.sub("step-00000003.h5")));
    EXPECT_TRUE(fs::exists(dir.sub("step-00000004.h5")));
    EXPECT_EQ(read_text(dir.sub("latest")), "step-00000004.h5\n");
  }
  // A run resumed from an older checkpoint keeps its new, lower-numbered file.
  write_test_checkpoint(dir.path(), 2, false, 1);
  if (world_rank() == 0) {
    EXPECT_TRUE(fs::exists(dir.sub("step-00000002.h5")));
    EXPECT_FALSE(fs::exists(dir.sub("step-00000004.h5")));
    EXPECT_EQ(read_text(dir.sub("latest")), "step-00000002.h5\n");
  }
  // keep_last 0 keeps everything.
  write_test_checkpoint(dir.path(), 9, false, 0);
  if (world_rank() == 0) {
    EXPECT_TRUE(fs::exists(dir.sub("step-00000002.h5")));
  }
}

// Copies a checkpoint to `name` in the same directory (rank 0) and applies damage to it.
std::string damaged_copy(const SharedTempDir& dir, const std::string& source,
                         const std::string& name,
                         const std::function<void(const std::string&)>& damage) {
  const std::string target = dir.sub(name);
  MPI_Barrier(MPI_COMM_WORLD);  // nobody is still reading what is about to be damaged
  if (world_rank() == 0) {
    fs::copy_file(source, target, fs::copy_options::overwrite_existing);
    damage(target);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return target;
}

// File offset and size of a contiguous dataset's data.
std::pair<haddr_t, hsize_t> data_location(const std::string& path, const std::string& dataset) {
  gpt::h5::Handle file(GPT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  gpt::h5::Handle d(GPT_H5_CHECK(H5Dopen2(file.id(), dataset.c_str(), H5P_DEFAULT)));
  return {H5Dget_offset(d.id()), H5Dget_storage_size(d.id())};
}

TEST(Checkpoint, CorruptionTruncationAndIncompleteFilesAreRejected) {
  SharedTempDir dir;
  const std::string good = write_test_checkpoint(dir.sub("run"), 1, true);

  const std::string flipped = damaged_copy(dir, good, "flipped.h5", [](const std::string& p) {
    auto [offset, size] = data_location(p, "/model/cols");
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset + size / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5A);
    f.seekp(static_cast<std::streamoff>(offset + size / 2));
    f.write(&c, 1);
  });
  expect_error([&] { gpt::open_checkpoint(flipped, MPI_COMM_WORLD); },
               {flipped, "/model/cols", "crc32"});

  const std::string truncated = damaged_copy(dir, good, "truncated.h5", [](const std::string& p) {
    fs::resize_file(p, fs::file_size(p) / 2);
  });
  expect_error([&] { gpt::open_checkpoint(truncated, MPI_COMM_WORLD); }, {truncated});

  const std::string incomplete = damaged_copy(dir, good, "incomplete.h5", [](const std::string& p) {
    gpt::h5::Handle f(GPT_H5_CHECK(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    GPT_H5_CHECK(H5Adelete(f.id(), "complete"));
  });
  expect_error([&] { gpt::open_checkpoint(incomplete, MPI_COMM_WORLD); },
               {incomplete, "incomplete"});

  const std::string foreign = damaged_copy(dir, good, "foreign.h5", [](const std::string& p) {
    gpt::h5::Handle f(GPT_H5_CHECK(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    gpt::h5::write_string_attribute(f.id(), "format", "something-else");
  });
  expect_error([&] { gpt::open_checkpoint(foreign, MPI_COMM_WORLD); }, {foreign, "something-else"});

  // One flipped bit in any metadata a resume reads is caught by the metadata checksum.
  const auto rewrite = [](const std::string& object, const std::function<void(hid_t)>& edit) {
    return [object, edit](const std::string& p) {
      gpt::h5::Handle f(GPT_H5_CHECK(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
      gpt::h5::Handle o(GPT_H5_CHECK(H5Oopen(f.id(), object.c_str(), H5P_DEFAULT)));
      edit(o.id());
    };
  };
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> edits = {
      {"step", rewrite("/", [](hid_t o) { gpt::h5::write_int64_attribute(o, "step", 1 ^ 4); })},
      {"optimizer_step",
       rewrite("/optimizer", [](hid_t o) { gpt::h5::write_int64_attribute(o, "step", 17 ^ 1); })},
      {"lr",
       rewrite("/optimizer", [](hid_t o) { gpt::h5::write_double_attribute(o, "lr", 3e-3); })},
      {"config", rewrite("/", [](hid_t o) {
         std::string config = *gpt::h5::read_string_attribute(o, "config");
         const size_t digit = config.find_first_of("0123456789");
         config[digit] = config[digit] == '1' ? '3' : '1';
         gpt::h5::write_string_attribute(o, "config", config);
       })}};
  for (const auto& [name, edit] : edits) {
    const std::string altered = damaged_copy(dir, good, name + ".h5", edit);
    expect_error([&] { gpt::open_checkpoint(altered, MPI_COMM_WORLD); },
                 {altered, "metadata crc32"});
  }

  const std::string missing = dir.sub("missing.h5");
  expect_error([&] { gpt::open_checkpoint(missing, MPI_COMM_WORLD); }, {missing, "no such file"});

  const std::string text = damaged_copy(dir, good, "text.h5", [](const std::string& p) {
    std::ofstream(p, std::ios::trunc) << "not hdf5\n";
  });
  expect_error([&] { gpt::open_checkpoint(text, MPI_COMM_WORLD); }, {text, "not an HDF5 file"});
}

// A config that describes a larger model than the file stores fails before the model is built.
TEST(Checkpoint, ConfigMustFitTheStoredModel) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.path(), 1, false);
  const std::unique_ptr<gpt::CheckpointReader> reader = gpt::open_checkpoint(path, MPI_COMM_WORLD);
  const gpt::ModelConfig small{
      .n_layer = 0, .n_head = 1, .d_model = 1, .seq_len = 1, .vocab_size = 1};
  EXPECT_NO_THROW(reader->check_holds_model(small));
  const gpt::ModelConfig huge{
      .n_layer = 1000000000, .n_head = 16, .d_model = 1024, .seq_len = 1024, .vocab_size = 50257};
  expect_error([&] { reader->check_holds_model(huge); },
               {path, "its config describes a model of", "/model datasets hold"});
}

TEST(Checkpoint, FindLatestSkipsInvalidFilesWithReasons) {
  SharedTempDir dir;
  std::vector<std::string> skipped;
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.sub("nonexistent"), &skipped, MPI_COMM_WORLD), "");
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), &skipped, MPI_COMM_WORLD), "");
  EXPECT_TRUE(skipped.empty());

  const std::string first = write_test_checkpoint(dir.path(), 1, false);
  const std::string second = write_test_checkpoint(dir.path(), 2, false);
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), &skipped, MPI_COMM_WORLD), second);
  // Damage the newest (which `latest` names): the previous one is taken, with a reason.
  damaged_copy(dir, first, "unused.h5",
               [&](const std::string&) { fs::resize_file(second, fs::file_size(second) - 100); });
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), &skipped, MPI_COMM_WORLD), first);
  // EXPECT, not ASSERT: returning early would leave the other ranks in the next barrier.
  EXPECT_EQ(skipped.size(), 1u);
  for (const std::string& reason : skipped)
    EXPECT_NE(reason.find("step-00000002.h5"), std::string::npos) << reason;
  // Without `latest`, files are tried by descending step.
  damaged_copy(dir, first, "unused.h5", [&](const std::string&) {
    fs::remove(dir.sub("latest"));
    fs::copy_file(first, dir.sub("step-00000010.h5"));
  });
  skipped.clear();
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), &skipped, MPI_COMM_WORLD),
            dir.sub("step-00000010.h5"));
  EXPECT_TRUE(skipped.empty());
}

// `latest` is written after the file it names: a kill in between leaves it naming the previous
// checkpoint, and the later file (a higher step, written after it) is taken. A higher step
// written before the file `latest` names is an abandoned continuation, and is not.
TEST(Checkpoint, FindLatestTakesAHigherStepWrittenAfterLatest) {
  SharedTempDir dir;
  const std::string three = write_test_checkpoint(dir.path(), 3, false);
  const std::string five = write_test_checkpoint(dir.path(), 5, false);
  damaged_copy(dir, three, "unused.h5", [&](const std::string&) {
    std::ofstream(dir.sub("latest"), std::ios::trunc) << "step-00000003.h5\n";
    fs::last_write_time(three, fs::last_write_time(five) - std::chrono::seconds(10));
  });
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), nullptr, MPI_COMM_WORLD), five);
  damaged_copy(dir, three, "step-00000004.h5", [&](const std::string& four) {
    std::ofstream(dir.sub("latest"), std::ios::trunc) << "step-00000004.h5\n";
    fs::last_write_time(five, fs::last_write_time(four) - std::chrono::seconds(10));
  });
  EXPECT_EQ(gpt::find_latest_checkpoint(dir.path(), nullptr, MPI_COMM_WORLD),
            dir.sub("step-00000004.h5"));
}

// --keep-last counts valid files only: a truncated one must not push a good one out, and neither
// must one whose structure is sound but one tensor's bytes are not (its crc32 fails: once such a
// file pushed out valid ones, whose data was then lost).
TEST(Checkpoint, KeepLastCountsOnlyValidFiles) {
  SharedTempDir dir;
  write_test_checkpoint(dir.path(), 1, false, 0);
  const std::string two = write_test_checkpoint(dir.path(), 2, false, 0);
  damaged_copy(dir, two, "unused.h5",
               [&](const std::string&) { fs::resize_file(two, fs::file_size(two) / 2); });
  write_test_checkpoint(dir.path(), 3, false, 2);
  if (world_rank() == 0) {
    EXPECT_TRUE(fs::exists(dir.sub("step-00000001.h5"))) << "the valid older file is kept";
    EXPECT_TRUE(fs::exists(dir.sub("step-00000002.h5"))) << "a damaged file is left alone";
    EXPECT_TRUE(fs::exists(dir.sub("step-00000003.h5")));
  }
  const std::string four = write_test_checkpoint(dir.path(), 4, false, 0);
  damaged_copy(dir, four, "unused.h5", [&](const std::string&) {
    // One byte of a tensor's data flipped: the file still opens.
    const haddr_t offset = data_location(four, "/model/cols").first;
    std::fstream bytes(four, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekg(static_cast<std::streamoff>(offset));
    const char byte = static_cast<char>(bytes.get() ^ 0x5A);
    bytes.seekp(static_cast<std::streamoff>(offset));
    bytes.put(byte);
  });
  write_test_checkpoint(dir.path(), 5, false, 2);
  if (world_rank() == 0) {
    gpt::CheckpointReader opens(four);  // the damage is in the data, not the structure
    EXPECT_TRUE(fs::exists(four)) << "a corrupt file is left alone";
    EXPECT_TRUE(fs::exists(dir.sub("step-00000003.h5"))) << "and does not push a valid one out";
    EXPECT_FALSE(fs::exists(dir.sub("step-00000001.h5"))) << "beyond the two valid ones";
  }
}

TEST(Checkpoint, ShapeMismatchAndMissingParameterNameTheParameter) {
  SharedTempDir dir;
  const std::string path = write_test_checkpoint(dir.path(), 1, false);
  const std::unique_ptr<gpt::CheckpointReader> opened = gpt::open_checkpoint(path, MPI_COMM_WORLD);
  const gpt::CheckpointReader& reader = *opened;
  {
    std::vector<Holding> layout = read_layout(world_rank(), world_size(), true);
    layout[1].shape = {8, 7};
    layout[1].slabs[0].count = {8, 7};
    auto model = build(layout, false, false);
    expect_error([&] { gpt::load_checkpoint(reader, *model->store, false); },
                 {"cols", "[8, 7]", "[8, 6]", path});
  }
  {
    std::vector<Holding> layout = read_layout(world_rank(), world_size(), true);
    layout.push_back({"h.9.extra", {2}, {make_slab({0}, {2}, 0)}, 0, false, false});
    auto model = build(layout, false, false);
    expect_error([&] { gpt::load_checkpoint(reader, *model->store, false); }, {"h.9.extra", path});
  }
  {  // a weights-only file cannot resume an optimizer
    auto model = build(read_layout(world_rank(), world_size(), true), true, false);
    EXPECT_FALSE(reader.has_optimizer());
    expect_error([&] { gpt::load_checkpoint(reader, *model->store, true); }, {"optimizer", path});
  }
}

TEST(Checkpoint, BadWritesFailOnEveryRankWithoutAFile) {
  SharedTempDir dir;
  // Every rank claims the replicated tensor: elements would be written more than once.
  {
    auto model = build(write_layout(world_rank(), world_size()), false, true);
    for (const gpt::Parameter& p : model->store->params())
      if (p.name == "replicated") model->owned.insert(&p);
    if (world_size() > 1) {
      expect_error(
          [&] {
            gpt::write_checkpoint(dir.path(), test_meta(1), nullptr, *model->store, model->owner(),
                                  MPI_COMM_WORLD, 0);
          },
          {"replicated", "exactly one"});
    }
  }
  // Nobody writes the tied tensor.
  {
    auto model = build(write_layout(world_rank(), world_size()), false, true);
    std::erase_if(model->owned, [](const gpt::Parameter* p) { return p->name == "wte"; });
    expect_error(
        [&] {
          gpt::write_checkpoint(dir.path(), test_meta(1), nullptr, *model->store, model->owner(),
                                MPI_COMM_WORLD, 0);
        },
        {"wte", "0 of the 8"});
  }
  // A directory that cannot be created (a regular file is in the way).
  if (world_rank() == 0) std::ofstream(dir.sub("blocker")) << "x";
  MPI_Barrier(MPI_COMM_WORLD);
  {
    auto model = build(write_layout(world_rank(), world_size()), false, true);
    expect_error(
        [&] {
          gpt::write_checkpoint(dir.sub("blocker/ckpt"), test_meta(1), nullptr, *model->store,
                                model->owner(), MPI_COMM_WORLD, 0);
        },
        {"blocker/ckpt"});
  }
  // An optimizer state the store does not have.
  {
    auto model = build(write_layout(world_rank(), world_size()), false, true);
    gpt::OptimizerMeta opt = test_optimizer();
    expect_error(
        [&] {
          gpt::write_checkpoint(dir.path(), test_meta(1), &opt, *model->store, model->owner(),
                                MPI_COMM_WORLD, 0);
        },
        {"exp_avg"});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    EXPECT_FALSE(fs::exists(dir.sub("step-00000001.h5")));
    EXPECT_FALSE(fs::exists(dir.sub("latest")));
  }
}

}  // namespace
