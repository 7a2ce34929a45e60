# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"

# The extensions built as macOS and the BSDs build them, here on Linux: with
# the kqueue loop (ORIBI_EVENT_LOOP=kqueue, through libkqueue), and as the
# portable build (ORIBI_PORTABLE=1: every Linux-only call left out for its
# POSIX fallback). Each builds without a warning, says which loop it has,
# and serves requests through a real server; the portable build imports
# nothing macOS or FreeBSD lacks. The whole suite runs on both builds in CI
# (.ci/run); this file keeps them buildable in every run of the suite.
class PortableBuildTest < Minitest::Test
  BUILDS = {
    "kqueue" => { "ORIBI_EVENT_LOOP" => "kqueue", "ORIBI_PORTABLE" => nil },
    "portable" => { "ORIBI_PORTABLE" => "1", "ORIBI_EVENT_LOOP" => nil },
  }.freeze
  # each extension: its sources, and the lib/ it loads from
  EXTS = { "oribi" => %w[ext/oribi lib], "oribi_bench" => %w[oribi-bench/ext/oribi_bench oribi-bench/lib] }.freeze

  # What the portable build may import, besides Ruby's C API (rb_*, ruby_*)
  # and OpenSSL's (the server's TLS listeners, the load generator's https): POSIX, kqueue, pthreads,
  # and the references the compiler and glibc's headers add on their own
  # (errno, fortified string functions, stack protector, C++ runtime hooks,
  # thread-local variables),
  # which name the same calls by other names on macOS and FreeBSD.
  ALLOWED = %w[
    accept calloc clock_gettime close connect fcntl fmax free freeaddrinfo fstat ftruncate gai_strerror getaddrinfo
    getenv getpid getrlimit getsockname getsockopt gmtime_r inet_ntop inet_pton kevent kqueue lseek malloc memchr
    memcmp memcpy memmove memset mkostemp mmap munmap open pipe poll pread pthread_create pthread_join pthread_once
    pthread_mutex_destroy pthread_mutex_init pthread_mutex_lock pthread_mutex_unlock pthread_sigmask pwrite qsort
    read realloc recv send sendmsg sendto setsockopt shutdown sigfillset snprintf socket sqrt strcmp strdup strerror
    strftime strlen strncasecmp strncmp strrchr time unlink write
  ].freeze
  TOOLCHAIN = /\A(__errno_location|__stack_chk_fail|__cxa_finalize|__gmon_start__|_ITM_\w+|__\w+_chk|__tls_get_addr)\z/
  FOREIGN_API = /\A(rb_|ruby_|SSL_|ERR_|X509_|TLS_|OPENSSL_|BIO_|PEM_|EVP_|ASN1_|OpenSSL_)/

  # The builds are made once per process (the file's tests share them).
  @built = {}
  class << self
    attr_reader :built
  end

  def build(name)
    self.class.built[name] ||= begin
      # A copy of exe/, lib/ and the tools' lib/ with the build's extensions
      # in them: exe/oribi puts its own lib/ and the tools' beside it first.
      dir = Dir.mktmpdir("oribi-#{name}-build")
      FileUtils.cp_r(File.join(ROOT, "exe"), dir)
      FileUtils.cp_r(File.join(ROOT, "lib"), dir)
      FileUtils.mkdir_p(File.join(dir, "oribi-bench"))
      FileUtils.cp_r(File.join(ROOT, "oribi-bench", "lib"), File.join(dir, "oribi-bench"))
      EXTS.each do |ext, (src, lib)|
        obj = File.join(dir, ext)
        FileUtils.mkdir_p(obj)
        env = BUILDS.fetch(name).merge("ORIBI_WERROR" => "1")
        out, _, status = run_command(RbConfig.ruby, File.join(ROOT, src, "extconf.rb"), env: env, chdir: obj,
                                                                                       merge: true, timeout: 120)
        assert status.success?, "#{name}: extconf.rb for #{ext} failed:\n#{log_end(out)}"
        out, _, status = run_command("make", "-j#{Etc.nprocessors}", env: env, chdir: obj, merge: true, timeout: 300)
        assert status.success?, "#{name}: make for #{ext} failed (a warning is an error):\n#{log_end(out)}"
        FileUtils.cp(File.join(obj, "#{ext}.so"), File.join(dir, lib, "oribi"))
      end
      dir
    end
  end

  # Ruby with the build's lib/ ahead of the checkout's (RUBYOPT: the tests
  # run under Bundler, which puts its paths before RUBYLIB's).
  def env_for(name) = { "RUBYOPT" => "-I#{build(name)}/lib -I#{build(name)}/oribi-bench/lib #{ENV.fetch('RUBYOPT', '')}" }

  def libkqueue!
    return if File.exist?("/usr/include/kqueue/sys/event.h") || File.exist?("/usr/include/sys/event.h")

    skip "libkqueue is not installed (Debian 12: .ci/libkqueue installs it)" unless ENV["ORIBI_KQUEUE_REQUIRED"] == "1"
    flunk "libkqueue is not installed, and ORIBI_KQUEUE_REQUIRED=1"
  end

  BUILDS.each_key do |name|
    define_method("test_the_#{name}_build_says_what_it_is") do
      libkqueue!
      out, err, status = run_command(RbConfig.ruby, "-e", 'require "oribi"; require "oribi/loadgen"; ' \
                                                          "puts Oribi::EVENT_LOOP, Oribi::PORTABLE, " \
                                                          '$LOADED_FEATURES.grep(/oribi(_bench)?\.so/)',
                                     env: env_for(name), timeout: 60)
      assert status.success?, err
      loop, portable, *sos = out.lines.map(&:chomp)
      assert_equal "kqueue (libkqueue)", loop
      assert_equal (name == "portable").to_s, portable
      assert_equal 2, sos.size
      sos.each { |so| assert so.start_with?(build(name)), "#{so} is not the #{name} build" }
    end

    define_method("test_the_#{name}_build_serves_keep_alive_and_a_connection_per_request") do
      libkqueue!
      srv = ServerProcess.new(File.join(ROOT, "bench/apps/hello.ru"), workers: 2, env: env_for(name),
                                                                       exe: File.join(build(name), "exe", "oribi"))
      assert_match(/\(Ruby [^)]*, kqueue \(libkqueue\)/, srv.log_until(/kqueue/))
      srv.each_transport do |_, connect|
        s = connect.call
        3.times do
          s.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
          assert_equal 200, HTTPClient.read_response(s, timeout: 5).status
        end
        s.close
        s = connect.call
        s.write("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        res = HTTPClient.read_response(s, timeout: 5)
        assert_equal "close", res["connection"]
        assert_nil HTTPClient.read_some(s, 1, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5), "closed after"
        s.close
      end
    ensure
      srv&.stop
    end
  end

  def test_the_portable_build_imports_nothing_macos_or_freebsd_lacks
    libkqueue!
    EXTS.each do |ext, (_, lib)|
      so = File.join(build("portable"), lib, "oribi", "#{ext}.so")
      assert_empty foreign_imports(so), "#{ext}.so (portable) imports what macOS or FreeBSD lack"
    end
  end

  # The check is not empty words: the same list finds the Linux build's
  # Linux-only calls.
  def test_the_list_finds_the_linux_builds_linux_only_calls
    skip "this checkout's extension is not the Linux epoll build" unless Oribi::EVENT_LOOP == "epoll" && !Oribi::PORTABLE
    foreign = foreign_imports(File.join(ROOT, "lib", "oribi", "oribi.so"))
    assert_includes foreign, "epoll_wait"
    assert_includes foreign, "accept4"
  end

  def foreign_imports(so)
    out, err, status = run_command("nm", "-D", "--undefined-only", so, timeout: 30)
    assert status.success?, err
    out.lines.map { |l| l.split.last.sub(/@.*/, "") }
       .reject { |s| ALLOWED.include?(s) || s.match?(TOOLCHAIN) || s.match?(FOREIGN_API) }
  end
end
