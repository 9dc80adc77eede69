// A refused tuning database leaves nothing behind: not the PATH.lock that the refused open made
// (newer schema, damage, truncation, garbage after SQLite's header, someone else's file), not the
// target of a symbolic link to nothing, and not the database that a refused import would have
// created; and a PATH.lock that another connection holds is never removed from under it.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "autotune/tuning_db.hpp"
#include "autotune/tuning_db_internal.hpp"
#include "fp8jit/error.hpp"
#include "tests/common/cli_run.hpp"
#include "tuning_db_rows.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using namespace tuning_rows;

class TuningDbRefusals : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(work_); }
  // A real fp8jit database at work/NAME with `rows` rows, as a copy of the file alone (so no
  // PATH.lock beside it, as after a download or a backup restore), in rollback-journal mode: a
  // read-only connection to a WAL file creates PATH-wal and PATH-shm whoever opens it.
  std::string database(const std::string& name, int rows = 400) {
    const std::string made = dir_ + "/made/" + name;
    {
      TuningDb db(made);
      for (int i = 0; i < rows; ++i) db.put(quant_record(kH200, 1 + i, 4096, 1.0 + i, kQuant, 6));
    }
    RawDb(made).exec("PRAGMA journal_mode = DELETE");
    fs::copy_file(made, work_ + "/" + name);
    fs::remove_all(dir_ + "/made");
    return work_ + "/" + name;
  }
  // The names of the files in work/ and a digest of their bytes (a failure shows no database).
  std::map<std::string, std::size_t> files() const {
    std::map<std::string, std::size_t> out;
    for (const auto& [name, bytes] : test::snapshot(work_))
      out[name] = std::hash<std::string>{}(bytes);
    return out;
  }

  test::TempDir tmp_{"fp8jit_tuning_refusals"};
  const std::string dir_ = tmp_.path(), work_ = dir_ + "/work";
};

TEST_F(TuningDbRefusals, RefusedFilesKeepNoLockBesideThem) {
  const std::string newer = database("newer.sqlite"), damaged = database("damaged.sqlite"),
                    cut = database("cut.sqlite"), garbage = work_ + "/garbage.sqlite",
                    foreign = work_ + "/foreign.sqlite";
  RawDb(newer).exec("UPDATE meta SET value = 99 WHERE key = 'schema_version'");
  std::fstream(damaged, std::ios::in | std::ios::out | std::ios::binary)
          .seekp(static_cast<std::streamoff>(fs::file_size(damaged) / 8192 * 4096))
      << std::string(4096, 'Z');
  fs::resize_file(cut, 4096);
  std::ofstream(garbage, std::ios::binary)
      << std::string("SQLite format 3", 16) << std::string(8192, '\x07');
  RawDb(foreign).exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)");
  const std::map<std::string, std::size_t> before = files();
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {newer, "newer than this fp8jit"},
           {damaged, "damaged"},
           {cut, "fp8jit db rebuild"},
           {garbage, "damaged"},
           {foreign, "not an fp8jit tuning database"}}) {
    SCOPED_TRACE(path);
    expect_error([&] { TuningDb db(path); }, ErrorKind::io, {why});
    EXPECT_FALSE(fs::exists(path + ".lock"));
  }
  // rebuild refuses a newer fp8jit's file (and someone else's) as a connection does.
  expect_error([&] { TuningDb::rebuild(newer); }, ErrorKind::io, {"newer"});
  expect_error([&] { TuningDb::rebuild(foreign); }, ErrorKind::io, {"not an fp8jit"});
  EXPECT_EQ(files(), before);
}

// A newer fp8jit's database is in WAL mode, as this one's are: refusing it must not leave the
// PATH-wal and PATH-shm that any SQLite connection to a WAL file creates.
TEST_F(TuningDbRefusals, RefusedWalFilesGetNoWalOrShm) {
  const std::string newer = database("newer.sqlite"), foreign = work_ + "/foreign.sqlite";
  RawDb(newer).exec("UPDATE meta SET value = 99 WHERE key = 'schema_version'");
  RawDb(newer).exec("PRAGMA journal_mode = WAL");
  RawDb(foreign).exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)");
  RawDb(foreign).exec("PRAGMA journal_mode = WAL");
  for (const std::string& path : {newer, foreign}) {
    ASSERT_FALSE(fs::exists(path + "-wal")) << "the set-up left a WAL file";
    const std::map<std::string, std::size_t> before = files();
    EXPECT_THROW(TuningDb db(path), Error);
    EXPECT_THROW(TuningDb::rebuild(path), Error);
    EXPECT_EQ(files(), before) << path;
  }
}

TEST_F(TuningDbRefusals, ALockThatAnotherConnectionHoldsStays) {
  using namespace tuning_db_detail;
  const std::string path = work_ + "/t.sqlite", lock = path + ".lock";
  bool created = false;
  int fd = lock_shared(path, created);
  ASSERT_TRUE(created);
  const int other = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);  // a second opener's lock
  ASSERT_EQ(::flock(other, LOCK_SH | LOCK_NB), 0);
  drop_created_lock(path, fd);
  EXPECT_TRUE(fs::exists(lock)) << "removed while another connection held it";
  ::close(other);
  fs::remove(lock);

  // A PATH.lock that is no longer the file this process created (removed and made again by
  // someone else meanwhile) is not this process's to remove.
  fd = lock_shared(path, created);
  ASSERT_TRUE(created);
  fs::rename(lock, lock + ".old");
  std::ofstream(lock).flush();
  drop_created_lock(path, fd);
  EXPECT_TRUE(fs::exists(lock));
  fs::remove(lock), fs::remove(lock + ".old");

  // Nobody else: gone.
  fd = lock_shared(path, created);
  ASSERT_TRUE(created);
  drop_created_lock(path, fd);
  EXPECT_FALSE(fs::exists(lock));
}

TEST_F(TuningDbRefusals, SymbolicLinkToNothingIsRefusedAndItsTargetNotCreated) {
  for (const std::string target : {"target.sqlite", "no/such/folder/target.sqlite"}) {
    SCOPED_TRACE(target);
    const std::string link = work_ + "/link.sqlite";
    fs::create_symlink(target, link);
    const std::map<std::string, std::size_t> before = files();
    const std::string doc = export_doc({quant_record(kH200, 1, 4096, 1.0)});
    for (const auto& open : {std::function<void()>([&] { TuningDb db(link); }),
                             std::function<void()>([&] { TuningDb::rebuild(link); }),
                             std::function<void()>([&] { TuningDb::import_into(link, doc); })})
      expect_error(open, ErrorKind::io,
                   {link + " is a symbolic link to nothing (" + target + " does not exist)"});
    EXPECT_EQ(files(), before);
    fs::remove(link);
  }
}

TEST_F(TuningDbRefusals, CliCommandsOnRefusedDatabasesWriteNothing) {
  const std::string newer = database("newer.sqlite", 10);
  RawDb(newer).exec("UPDATE meta SET value = 99 WHERE key = 'schema_version'");
  fs::create_symlink("target.sqlite", work_ + "/link.sqlite");
  std::ofstream(dir_ + "/bad.json") << R"({"format":"fp8jit-tuning","version":1,"rows":[{}]})";
  std::ofstream(dir_ + "/good.json") << export_doc({quant_record(kH200, 1, 4096, 1.0)});
  test::CliRun how;
  how.cwd = work_;
  how.timeout_s = 60;
  how.env = fmt::format("FP8JIT_DB={}/work/default.sqlite FP8JIT_CACHE_DIR={}/cache", dir_, dir_);
  const std::map<std::string, std::size_t> before = files();
  for (const std::string db : {"newer.sqlite", "link.sqlite", "missing.sqlite"}) {
    std::vector<std::vector<std::string>> commands = {
        {"db", "list", "--db", db},    {"db", "show", "--db", db},
        {"db", "export", "--db", db},  {"db", "prune", "--db", db},
        {"db", "rebuild", "--db", db}, {"db", "import", "--db", db, "--file", dir_ + "/bad.json"}};
    if (db != "missing.sqlite")  // (a good import creates a missing database, as it should)
      commands.push_back({"db", "import", "--db", db, "--file", dir_ + "/good.json"});
    for (const std::vector<std::string>& args : commands) {
      const test::CliResult r = test::run_cli(args, dir_, how);
      const std::string what = fmt::format("fp8jit {}: {}", fmt::join(args, " "), r.err);
      EXPECT_TRUE(r.exited && !r.timed_out && r.status <= 1) << what;
      EXPECT_EQ(files(), before) << what;
    }
  }
  // The default database (FP8JIT_DB) too: a refused import creates neither it nor its lock.
  const test::CliResult r =
      test::run_cli({"db", "import", "--file", dir_ + "/bad.json"}, dir_, how);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("rows[0]: missing field"), std::string::npos) << r.err;
  EXPECT_EQ(files(), before);
}

}  // namespace
}  // namespace fp8jit
