// Tests for runtime/file_io: reading never blocks on a FIFO or device, and a set of output files
// is written all or nothing with no temporary left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file_io.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using test::error_message;

// Read back through the reader under test: its own tests in this file pin what it returns.
std::string slurp(const std::string& path) {
  return read_regular_file(path, "test");
}

void put(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Every name in a folder, sorted: a stray temporary shows up here.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh folder holding two empty folders a/ and b/, removed afterwards.
class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "fp8jit_file_io_XXXXXX";
    ASSERT_NE(::mkdtemp(root_.data()), nullptr);
    a_ = root_ + "/a";
    b_ = root_ + "/b";
    for (const std::string& dir : {a_, b_}) ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  }
  void TearDown() override {
    ::chmod(b_.c_str(), 0755);  // a test may have made it read-only
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  std::string fifo(const std::string& path) {
    EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
    return path;
  }
  std::string root_, a_, b_;
};

TEST_F(FileIoTest, SpecialFileKindNamesWhatIsThere) {
  put(a_ + "/file", "x");
  EXPECT_EQ(special_file_kind(a_ + "/file"), "");
  EXPECT_EQ(special_file_kind(a_ + "/missing"), "");
  EXPECT_EQ(special_file_kind(a_), "a directory");
  EXPECT_EQ(special_file_kind(fifo(a_ + "/fifo")), "a FIFO");
  EXPECT_EQ(special_file_kind("/dev/null"), "a character device");
  fs::create_symlink(a_ + "/file", a_ + "/good_link");
  EXPECT_EQ(special_file_kind(a_ + "/good_link"), "");
  fs::create_symlink(a_ + "/nothing", a_ + "/dangling");
  EXPECT_EQ(special_file_kind(a_ + "/dangling"), "a symbolic link to nothing");

  const std::string sock = a_ + "/sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(special_file_kind(sock), "a socket");
  const std::string msg = error_message(ErrorKind::io, [&] { read_regular_file(sock, "--in"); });
  EXPECT_TRUE(contains(msg, "is a socket, not a regular file")) << msg;
  ::close(fd);
}

TEST_F(FileIoTest, ReadsExactBytes) {
  std::string data = "line\n";
  data += std::string(3, '\0') + std::string(200000, '\xab');
  put(a_ + "/bin", data);
  EXPECT_EQ(read_regular_file(a_ + "/bin", "--in"), data);
  put(a_ + "/empty", "");
  EXPECT_EQ(read_regular_file(a_ + "/empty", "--in"), "");
}

// In a child with an alarm: without O_NONBLOCK the open itself would block for good, and the
// alarm then kills the child instead of hanging the test run.
TEST_F(FileIoTest, FifoFailsAtOnceInsteadOfBlocking) {
  const std::string path = fifo(a_ + "/pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(5);
    int code = 3;  // did not throw
    try {
      read_regular_file(path, "--shapes");
    } catch (const Error& e) {
      const std::string msg = e.what();
      const bool ok = e.kind() == ErrorKind::io && contains(msg, "--shapes " + path + ": ") &&
                      contains(msg, "is a FIFO, not a regular file");
      code = ok ? 0 : 2;
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status) << ": it blocked";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: wrong message, 3: no error, 4: not an fp8jit::Error";
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(special_file_kind(path), "a FIFO");
}

TEST_F(FileIoTest, DirectoryMissingAndDeviceAreNamed) {
  std::string msg = error_message(ErrorKind::io, [&] { read_regular_file(a_, "--shapes"); });
  EXPECT_EQ(msg, "--shapes " + a_ + ": is a directory, expected a file");
  msg = error_message(ErrorKind::io, [&] { read_regular_file(a_ + "/nope", "--shapes"); });
  EXPECT_EQ(msg, "--shapes " + a_ + "/nope: no such file");
  msg = error_message(ErrorKind::io, [&] { read_regular_file("/dev/null", "input"); });
  EXPECT_EQ(msg, "input /dev/null: is a character device, not a regular file");
  fs::create_symlink(a_ + "/nothing", a_ + "/dangling");
  msg = error_message(ErrorKind::io, [&] { read_regular_file(a_ + "/dangling", "input"); });
  EXPECT_TRUE(contains(msg, "is a symbolic link to nothing")) << msg;
}

TEST_F(FileIoTest, OversizeIsRefused) {
  put(a_ + "/ten", "0123456789");
  EXPECT_EQ(read_regular_file(a_ + "/ten", "in", 10), "0123456789");
  std::string msg = error_message(ErrorKind::io, [&] { read_regular_file(a_ + "/ten", "in", 9); });
  EXPECT_EQ(msg, "in " + a_ + "/ten: larger than 9 bytes");
  put(a_ + "/big", std::string((std::size_t{1} << 20) + 1, 'x'));
  msg = error_message(ErrorKind::io,
                      [&] { read_regular_file(a_ + "/big", "in", std::size_t{1} << 20); });
  EXPECT_TRUE(contains(msg, "larger than 1 MiB")) << msg;
}

TEST_F(FileIoTest, UnreadableFileSaysPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  put(a_ + "/secret", "x");
  ASSERT_EQ(::chmod((a_ + "/secret").c_str(), 0), 0);
  const std::string msg =
      error_message(ErrorKind::io, [&] { read_regular_file(a_ + "/secret", "in"); });
  EXPECT_EQ(msg, "in " + a_ + "/secret: permission denied");
}

TEST(Printable, EscapesEverythingButPrintableAscii) {
  EXPECT_EQ(printable(""), "");
  EXPECT_EQ(printable("plain text, 100% ~ok~"), "plain text, 100% ~ok~");
  EXPECT_EQ(printable("a\x1b[31mb\x7f\n\t"), "a\\x1b[31mb\\x7f\\x0a\\x09");
  EXPECT_EQ(printable(std::string_view("\0\xff\x80", 3)), "\\x00\\xff\\x80");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\\xc3\\xa9");  // UTF-8 too: a terminal may misread it
}

TEST(Printable, CutsAtMaxWithoutSplittingAnEscape) {
  EXPECT_EQ(printable("abc", 3), "abc");
  EXPECT_EQ(printable("abcdef", 3), "abc...");
  EXPECT_EQ(printable("ab\x01z", 5), "ab...");
  EXPECT_EQ(printable("ab\x01z", 6), "ab\\x01...");
  EXPECT_EQ(printable(std::string(1000, 'x')).size(), 203u);
}

TEST_F(FileIoTest, CommitWritesExactBytesAndNoTemporaries) {
  std::string bin = "ELF";
  bin += std::string(2, '\0') + "\xff\n";
  {
    OutputFiles out;
    out.add(a_ + "/one.cu", "source\n");
    out.add(b_ + "/two.cubin", bin);
    EXPECT_EQ(out.size(), 2u);
    out.commit();
    EXPECT_EQ(out.size(), 0u);
    out.add(a_ + "/three", "reused");  // the set is empty and usable again
    out.commit();
  }
  EXPECT_EQ(slurp(a_ + "/one.cu"), "source\n");
  EXPECT_EQ(slurp(b_ + "/two.cubin"), bin);
  EXPECT_EQ(slurp(a_ + "/three"), "reused");
  EXPECT_EQ(listing(a_), (std::vector<std::string>{"one.cu", "three"}));
  EXPECT_EQ(listing(b_), std::vector<std::string>{"two.cubin"});
}

TEST_F(FileIoTest, ExistingTargetReplacedOnlyOnCommit) {
  put(a_ + "/out", "old contents");
  ASSERT_EQ(::chmod((a_ + "/out").c_str(), 0600), 0);
  OutputFiles out;
  out.add(a_ + "/out", "new");
  EXPECT_EQ(slurp(a_ + "/out"), "old contents");
  out.commit();
  EXPECT_EQ(slurp(a_ + "/out"), "new");
  struct stat st {};
  ASSERT_EQ(::stat((a_ + "/out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a private file must stay private";
  EXPECT_EQ(listing(a_), std::vector<std::string>{"out"});
}

TEST_F(FileIoTest, DestructorWithoutCommitLeavesNothing) {
  put(a_ + "/kept", "old");
  {
    OutputFiles out;
    out.add(a_ + "/kept", "new");
    out.add(b_ + "/fresh", "data");
  }
  EXPECT_EQ(slurp(a_ + "/kept"), "old");
  EXPECT_EQ(listing(a_), std::vector<std::string>{"kept"});
  EXPECT_TRUE(listing(b_).empty());
}

TEST_F(FileIoTest, BadTargetsFailAtAdd) {
  OutputFiles out;
  std::string msg = error_message(ErrorKind::io, [&] { out.add(b_, "x"); });
  EXPECT_EQ(msg, "cannot write " + b_ + ": it is a directory; give a file path");
  msg = error_message(ErrorKind::io, [&] { out.add(root_ + "/no/such/dir/f", "x"); });
  EXPECT_TRUE(contains(msg, root_ + "/no/such/dir/f") && contains(msg, "does not exist")) << msg;
  put(a_ + "/plain", "x");
  msg = error_message(ErrorKind::io, [&] { out.add(a_ + "/plain/f", "x"); });
  EXPECT_TRUE(contains(msg, a_ + "/plain is not a directory")) << msg;
  const std::string pipe = fifo(a_ + "/pipe");
  msg = error_message(ErrorKind::io, [&] { out.add(pipe, "x"); });
  EXPECT_TRUE(contains(msg, pipe) && contains(msg, "it is a FIFO, not a regular file")) << msg;
  out.add(a_ + "/ok", "x");
  msg = error_message(ErrorKind::invalid_argument, [&] { out.add(a_ + "/ok", "y"); });
  EXPECT_TRUE(contains(msg, "twice")) << msg;
  EXPECT_EQ(out.size(), 1u);
}

// The second target turns into a directory after add(): the first file's temporary was already
// written when commit() finds out, and must be removed with nothing renamed.
TEST_F(FileIoTest, SecondTargetBecomesDirectoryNeitherIsWritten) {
  put(a_ + "/first", "old first");
  OutputFiles out;
  out.add(a_ + "/first", "new first");
  out.add(b_ + "/second", "new second");
  fs::create_directory(b_ + "/second");
  const std::string msg = error_message(ErrorKind::io, [&] { out.commit(); });
  EXPECT_EQ(msg, "cannot write " + b_ + "/second: it is a directory; give a file path");
  EXPECT_EQ(slurp(a_ + "/first"), "old first");
  EXPECT_EQ(listing(a_), std::vector<std::string>{"first"});
  EXPECT_EQ(listing(b_), std::vector<std::string>{"second"});
  EXPECT_TRUE(fs::is_directory(b_ + "/second"));
}

TEST_F(FileIoTest, SecondFolderRemovedNeitherIsWritten) {
  OutputFiles out;
  out.add(a_ + "/first", "1");
  out.add(b_ + "/second", "2");
  fs::remove(b_);
  const std::string msg = error_message(ErrorKind::io, [&] { out.commit(); });
  EXPECT_TRUE(contains(msg, "cannot write " + b_ + "/second: ") && contains(msg, "does not exist"))
      << msg;
  EXPECT_TRUE(listing(a_).empty());
  fs::create_directory(b_);  // a retry after the cause is fixed writes both
  out.commit();
  EXPECT_EQ(slurp(a_ + "/first"), "1");
  EXPECT_EQ(slurp(b_ + "/second"), "2");
}

TEST_F(FileIoTest, UnwritableSecondFolderNeitherIsWritten) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  OutputFiles out;
  out.add(a_ + "/first", "1");
  out.add(b_ + "/second", "2");
  ASSERT_EQ(::chmod(b_.c_str(), 0555), 0);
  std::string msg = error_message(ErrorKind::io, [&] { out.commit(); });
  EXPECT_TRUE(contains(msg, "cannot write " + b_ + "/second: permission denied")) << msg;
  EXPECT_TRUE(listing(a_).empty());
  EXPECT_TRUE(listing(b_).empty());
  msg = error_message(ErrorKind::io, [&] { OutputFiles().add(b_ + "/x", "x"); });
  EXPECT_TRUE(contains(msg, "permission denied")) << msg;
}

TEST_F(FileIoTest, SymlinkTargetIsWrittenThrough) {
  put(b_ + "/real", "old");
  fs::create_symlink(b_ + "/real", a_ + "/link");
  OutputFiles out;
  out.add(a_ + "/link", "new");
  out.commit();
  EXPECT_TRUE(fs::is_symlink(a_ + "/link"));
  EXPECT_EQ(slurp(b_ + "/real"), "new");
  EXPECT_EQ(listing(b_), std::vector<std::string>{"real"});
}

}  // namespace
}  // namespace fp8jit
