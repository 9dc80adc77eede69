// The tuning database never loses or damages data it does not own: rebuild leaves a healthy file
// alone and never moves a file that another connection has open; someone else's file (another
// program's SQLite database, a text file) is refused and left byte-identical; paths that cannot
// be a database (directories, FIFOs, unwritable places) are named as such before SQLite opens
// them.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"
#include "tuning_db_rows.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using namespace tuning_rows;

constexpr const char* kNotOurs = "is not an fp8jit tuning database";

// The message of the Error that `f` throws, "<no error>" when it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

struct ChildResult {
  std::string out;  // what the child reported
  bool timed_out = false;
};

// Runs `f` in a child process that dies after 5 s (opening a FIFO must not hang the test) and,
// with `as_nobody`, runs as user nobody when this is root, whom permission bits do not stop.
ChildResult in_child(const std::function<std::string()>& f, bool as_nobody = false) {
  int out[2];
  if (::pipe(out) != 0) return {"pipe failed"};
  const pid_t pid = ::fork();
  if (pid == 0) {  // no gtest in here: report through the pipe
    ::close(out[0]);
    ::alarm(5);
    std::string text;
    if (as_nobody && ::geteuid() == 0 &&
        (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      text = std::string("SKIP: cannot drop root: ") + std::strerror(errno);
    else
      text = f();
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(out[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    r.out.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.timed_out = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
  return r;
}

class TuningDbSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit_tuning_safety_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::permissions(dir_, fs::perms(0755));  // user nobody must reach the files below
    path_ = dir_ + "/tuning.sqlite";
  }
  void TearDown() override {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir_, ec))
      if (e.is_directory(ec))
        fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::vector<std::string> corrupt_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".corrupt-") != std::string::npos)
        out.push_back(e.path());
    return out;
  }
  // No file fp8jit would have created beside `path`.
  void expect_no_litter(const std::string& path) const {
    for (const char* suffix : {"-wal", "-shm", "-journal", ".lock"})
      EXPECT_FALSE(TuningDb::exists(path + suffix)) << path + suffix;
    EXPECT_TRUE(corrupt_files().empty());
  }
  std::string dir_, path_;
};

std::vector<TuningRecord> quant_rows(int first_m, int count, int candidates = 2) {
  std::vector<TuningRecord> rows;
  for (int i = 0; i < count; ++i)
    rows.push_back(quant_record(kH200, first_m + i, 4096, 1.0 + first_m + i, kQuant, candidates));
  return rows;
}

TEST_F(TuningDbSafety, RebuildDuringImportsLosesNoRow) {
  constexpr int kProcs = 8, kRowsEach = 2000;
  std::vector<std::string> docs;
  for (int p = 0; p < kProcs; ++p) docs.push_back(export_doc(quant_rows(p * kRowsEach, kRowsEach)));
  { TuningDb db(path_); }
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      (void)!::read(gate[0], &c, 1);
      int code = 0;
      try {
        code = TuningDb(path_).import_json(docs[p]).inserted == kRowsEach ? 0 : 4;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        code = 2;
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // go
  std::size_t rebuilds = 0, last_rows = 0;
  for (std::size_t running = kids.size(); running > 0;) {
    const RebuildStats s = TuningDb::rebuild(path_);
    ++rebuilds;
    EXPECT_TRUE(s.healthy);
    EXPECT_EQ(s.moved_to, "");
    EXPECT_GE(s.rows, last_rows);  // rows only ever arrive
    last_rows = s.rows;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // leave the importers room
    for (pid_t& pid : kids) {
      int status = 0;
      if (pid <= 0 || ::waitpid(pid, &status, WNOHANG) != pid) continue;
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "2: an error, 4: rows not inserted";
      pid = 0, --running;
    }
  }
  EXPECT_GE(rebuilds, 1u);
  EXPECT_TRUE(corrupt_files().empty());
  TuningDb db(path_);
  EXPECT_EQ(db.row_count(), std::size_t{kProcs * kRowsEach});
  const std::vector<TuningRecord> rows = db.list();
  ASSERT_EQ(rows.size(), std::size_t{kProcs * kRowsEach});
  for (const TuningRecord& r : rows) EXPECT_EQ(r.best_us, 1.0 + r.m);
}

TEST_F(TuningDbSafety, RebuildLeavesHealthyDatabaseAlone) {
  TuningDb open_here(path_);  // another connection in this process does not matter to a check
  for (const TuningRecord& r : quant_rows(1, 10)) open_here.put(r);
  const std::string before = open_here.export_json();
  RebuildStats s = TuningDb::rebuild(path_);
  EXPECT_TRUE(s.healthy);
  EXPECT_EQ(s.rows, 10u);
  EXPECT_EQ(s.moved_to, "");
  EXPECT_EQ(s.rows_read + s.rows_copied + s.rows_dropped, 0u);
  EXPECT_EQ(open_here.export_json(), before);
  EXPECT_TRUE(open_here.put(quant_record(kH200, 500, 4096, 3.0)));  // still the live file
  EXPECT_EQ(TuningDb::rebuild(path_).rows, 11u);
  EXPECT_TRUE(corrupt_files().empty());

  // A first-release database is healthy too: rebuild does not even migrate it.
  const std::string v1 = dir_ + "/v1.sqlite";
  {
    RawDb raw(v1);
    raw.exec(kV1Schema);
    raw.exec("INSERT INTO meta VALUES ('schema_version', 1)");
    raw.insert(raw_row(kH200.str(), std::int64_t{128}, spec_to_json(kQuant), 7.5));
  }
  const std::string bytes = file_bytes(v1);
  s = TuningDb::rebuild(v1);
  EXPECT_TRUE(s.healthy);
  EXPECT_EQ(s.rows, 1u);
  EXPECT_EQ(file_bytes(v1), bytes);

  // Nothing there: rebuild leaves an empty database, as any command would.
  s = TuningDb::rebuild(dir_ + "/new/fresh.sqlite");
  EXPECT_TRUE(s.healthy);
  EXPECT_EQ(s.rows, 0u);
  EXPECT_EQ(TuningDb(dir_ + "/new/fresh.sqlite").schema_version(), TuningDb::kSchemaVersion);
}

// Overwrites a page in the middle of the file, as a failing disk would.
void damage(const std::string& path) {
  const auto size = fs::file_size(path);
  std::fstream(path, std::ios::in | std::ios::out | std::ios::binary).seekp(size / 8192 * 4096)
      << std::string(4096, 'Z');
}

TEST_F(TuningDbSafety, RebuildWaitsUntilNoConnectionHasTheDamagedFileOpen) {
  constexpr int kRows = 400;
  {
    TuningDb db(path_);
    for (const TuningRecord& r : quant_rows(1, kRows, 6)) db.put(r);
  }
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // holds the database open until told to exit
    ::close(ready[0]), ::close(go[1]);
    int code = 0;
    try {
      TuningDb db(path_);
      (void)!::write(ready[1], "x", 1);
      char c;
      (void)!::read(go[0], &c, 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 2;
    }
    ::_exit(code);
  }
  ::close(ready[1]), ::close(go[0]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  std::optional<TuningDb> open_here(path_);  // and one connection in this process
  damage(path_);
  const std::string damaged = file_bytes(path_);
  const std::string in_use = "tuning database " + path_ + " is in use by another process";
  for (int holders = 2; holders > 0; --holders) {
    SCOPED_TRACE(holders == 2 ? "another process and this one" : "only this process");
    expect_error([&] { TuningDb::rebuild(path_); }, ErrorKind::io,
                 {in_use, "`fp8jit db rebuild`", "damaged"});
    EXPECT_EQ(file_bytes(path_), damaged);
    EXPECT_TRUE(corrupt_files().empty());
    if (holders == 2) {  // let the child go
      ::close(go[1]);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  open_here.reset();
  const RebuildStats s = TuningDb::rebuild(path_);
  EXPECT_FALSE(s.healthy);
  EXPECT_EQ(s.moved_to.rfind(path_ + ".corrupt-", 0), 0u) << s.moved_to;
  EXPECT_GT(s.rows_copied, 0u);
  EXPECT_LT(s.rows_copied, std::size_t{kRows});
  EXPECT_EQ(s.rows, s.rows_copied);
  const std::vector<TuningRecord> rows = TuningDb(path_).list();
  EXPECT_EQ(rows.size(), s.rows_copied);
  for (const TuningRecord& r : rows) EXPECT_EQ(r.best_us, 1.0 + r.m);
  EXPECT_TRUE(TuningDb::rebuild(path_).healthy);  // and a second run finds nothing to do
}

TEST_F(TuningDbSafety, OpenWaitsWhileRebuildHoldsTheLock) {
  { TuningDb db(path_); }
  const int fd = ::open((path_ + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << "a connection closed but still holds the lock";
  std::atomic<bool> opened{false};
  std::string error;
  std::thread t([&] {
    error = error_of([&] { TuningDb db(path_); });
    opened = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(opened) << "opened while a rebuild held the lock";
  ::close(fd);
  t.join();
  EXPECT_EQ(error, "<no error>");
  // And the other way round: an open connection keeps rebuild's exclusive lock out.
  TuningDb db(path_);
  const int fd2 = ::open((path_ + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_NE(::flock(fd2, LOCK_EX | LOCK_NB), 0);
  ::close(fd2);
}

struct Foreign {
  const char* what;
  std::string sql;       // written by SQLite in its default rollback-journal mode
  std::string expected;  // in the message
};

TEST_F(TuningDbSafety, ForeignFilesAreRefusedAndLeftByteIdentical) {
  std::string many_tables;
  for (int i = 0; i < 10; ++i) many_tables += "CREATE TABLE t" + std::to_string(i) + " (x);";
  const std::vector<Foreign> cases = {
      {"another program's database",
       "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, "
       "'ann');"
       "CREATE TABLE \"odd\x01name\" (x);",
       "(it holds tables: users, odd\\x01name)"},
      {"fp8jit's tables and one more",
       std::string(kV1Schema) +
           "INSERT INTO meta VALUES ('schema_version', 1); CREATE TABLE notes (x);",
       "(it holds tables: meta, results, notes)"},
      {"a results table of its own",
       "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL); INSERT INTO meta VALUES "
       "('schema_version', 2);"
       "CREATE TABLE results (id INTEGER, score REAL);",
       "(it holds tables: meta, results; its results table has other columns)"},
      {"a meta table without schema_version", kV1Schema,
       "(it holds tables: meta, results; its meta table has no schema_version)"},
      {"a view",
       std::string(kV1Schema) +
           "INSERT INTO meta VALUES ('schema_version', 1); CREATE VIEW v AS SELECT 1;",
       "(it holds tables: meta, results; view v)"},
      {"many tables", many_tables, "(it holds tables: t0, t1, t2, t3, t4, t5, t6, t7 and 2 more)"},
  };
  for (const Foreign& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir_ + "/" + std::to_string(&c - cases.data()) + ".sqlite";
    RawDb(path).exec(c.sql);
    ASSERT_EQ(RawDb(path).scalar("PRAGMA journal_mode"), "delete");
    const std::string bytes = file_bytes(path);
    for (const auto& entry : {std::function<void()>([&] { TuningDb db(path); }),
                              std::function<void()>([&] { TuningDb::rebuild(path); })}) {
      const std::string msg = error_of(entry);
      EXPECT_NE(msg.find(path + " " + kNotOurs + " " + c.expected), std::string::npos) << msg;
      EXPECT_NE(msg.find("point FP8JIT_DB or --db at another file"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("CREATE"), std::string::npos) << msg;
    }
    EXPECT_EQ(file_bytes(path), bytes);
    expect_no_litter(path);
  }
  // Not SQLite at all: refused, not "repaired" by rebuild.
  std::ofstream(path_, std::ios::binary) << "name,score\nann,3\n" << std::string(5000, '#');
  const std::string bytes = file_bytes(path_);
  for (const auto& entry : {std::function<void()>([&] { TuningDb db(path_); }),
                            std::function<void()>([&] { TuningDb::rebuild(path_); })})
    EXPECT_NE(error_of(entry).find(path_ + " " + kNotOurs + " (not an SQLite file)"),
              std::string::npos)
        << error_of(entry);
  EXPECT_EQ(file_bytes(path_), bytes);
  expect_no_litter(path_);
}

TEST_F(TuningDbSafety, EmptyFilesAreAdopted) {
  std::ofstream(path_, std::ios::binary).flush();  // zero bytes
  EXPECT_EQ(TuningDb(path_).schema_version(), TuningDb::kSchemaVersion);
  const std::string emptied = dir_ + "/emptied.sqlite";
  RawDb(emptied).exec("CREATE TABLE t (x); DROP TABLE t;");  // an SQLite file without tables
  EXPECT_EQ(TuningDb(emptied).schema_version(), TuningDb::kSchemaVersion);
}

TEST_F(TuningDbSafety, PathsThatAreNoFileAreNamedWithoutOpeningThem) {
  const std::string dir = dir_ + "/a-folder", fifo = dir_ + "/fifo.sqlite",
                    sock = dir_ + "/sock.sqlite";
  fs::create_directory(dir);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir, dir + " is a directory; FP8JIT_DB / --db must name a file"},
      {fifo, fifo + " is a FIFO, not a regular file; FP8JIT_DB / --db must name a file"},
      {sock, sock + " is a socket, not a regular file; FP8JIT_DB / --db must name a file"},
  };
  for (const auto& [path, expected] : cases) {
    EXPECT_TRUE(TuningDb::exists(path));
    const ChildResult r = in_child([&] {  // an open that blocks is killed after 5 s
      return error_of([&] { TuningDb db(path); }) + "\n" +
             error_of([&] { TuningDb::rebuild(path); });
    });
    EXPECT_FALSE(r.timed_out) << path << ": blocked";
    EXPECT_EQ(r.out, expected + "\n" + expected) << r.out;
    expect_no_litter(path);
  }
  ::close(s);
  EXPECT_FALSE(TuningDb::exists(dir_ + "/nothing"));
  EXPECT_FALSE(TuningDb::exists(""));
  fs::create_symlink(dir_ + "/nothing", dir_ + "/dangling");
  EXPECT_TRUE(TuningDb::exists(dir_ + "/dangling"));
}

TEST_F(TuningDbSafety, UnwritablePlacesAreNamed) {
  // /proc/self takes no new files, whoever asks (root included).
  for (const std::string path :
       {"/proc/self/fp8jit-tuning.sqlite", "/proc/self/fp8jit-folder/tuning.sqlite"})
    expect_error([&] { TuningDb db(path); }, ErrorKind::io,
                 {"cannot create " + path + ": folder /proc/self is not writable"});

  // The rest as user nobody when this is root: permission bits do not stop root.
  const std::string ro_file = dir_ + "/rw/tuning.sqlite", ro_dir = dir_ + "/ro",
                    in_ro = ro_dir + "/tuning.sqlite";
  TuningDb(ro_file).put(quant_record(kH200, 1, 4096, 1.0));
  TuningDb(in_ro).put(quant_record(kH200, 1, 4096, 1.0));
  fs::permissions(ro_file, fs::perms(0444));
  fs::permissions(dir_ + "/rw", fs::perms(0777));
  fs::permissions(in_ro, fs::perms(0666));
  fs::permissions(ro_dir, fs::perms(0555));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ro_file, ro_file + " is not writable (Permission denied)"},
      {in_ro, in_ro + ": folder " + ro_dir + " is not writable"},
      {ro_dir + "/missing.sqlite",
       "cannot create " + ro_dir + "/missing.sqlite: folder " + ro_dir + " is not writable"},
      {ro_dir + "/sub/missing.sqlite",
       "cannot create " + ro_dir + "/sub/missing.sqlite: folder " + ro_dir + " is not writable"},
  };
  for (const auto& [path, expected] : cases) {
    const ChildResult r = in_child(
        [&] {
          return error_of([&] { TuningDb db(path); }) + "\n" +
                 error_of([&] { TuningDb::rebuild(path); });
        },
        /*as_nobody=*/true);
    if (r.out.rfind("SKIP", 0) == 0) GTEST_SKIP() << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n" + expected), std::string::npos) << "rebuild: " << r.out;
    if (path == in_ro) EXPECT_NE(r.out.find(in_ro + "-wal"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(TuningDb::exists(ro_dir + "/missing.sqlite"));
  EXPECT_FALSE(TuningDb::exists(ro_dir + "/sub"));
  EXPECT_EQ(file_bytes(ro_file).size(), fs::file_size(ro_file));  // still readable, untouched
}

}  // namespace
}  // namespace fp8jit
