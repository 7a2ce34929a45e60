# frozen_string_literal: true

require "openssl"
require "socket"

# Certificates made for a test (ECDSA P-256, as a server would have them),
# and a TLS client the HTTP helpers read from like a socket.
module TLSFiles
  module_function

  def key = OpenSSL::PKey::EC.generate("prime256v1")

  # A self-signed certificate for cn (and 127.0.0.1); valid from `from`
  # for days. → [cert PEM, key PEM]
  def self_signed(cn: "localhost", days: 30, from: Time.now - 60, key: self.key)
    cert = OpenSSL::X509::Certificate.new
    cert.version = 2
    cert.serial = rand(1 << 60)
    cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=#{cn}")
    cert.public_key = key
    cert.not_before = from
    cert.not_after = from + (days * 86_400)
    ext = OpenSSL::X509::ExtensionFactory.new(cert, cert)
    cert.add_extension(ext.create_extension("subjectAltName", "DNS:#{cn},IP:127.0.0.1"))
    cert.sign(key, "SHA256")
    [cert.to_pem, key.private_to_pem]
  end

  # A certificate authority: [its certificate, its key] (objects).
  def ca(cn: "Oribi Test CA")
    key = self.key
    cert = OpenSSL::X509::Certificate.new
    cert.version = 2
    cert.serial = 1
    cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=#{cn}")
    cert.public_key = key
    cert.not_before = Time.now - 60
    cert.not_after = Time.now + 86_400
    ext = OpenSSL::X509::ExtensionFactory.new(cert, cert)
    cert.add_extension(ext.create_extension("basicConstraints", "CA:TRUE", true))
    cert.add_extension(ext.create_extension("keyUsage", "keyCertSign,cRLSign", true))
    cert.sign(key, "SHA256")
    [cert, key]
  end

  # A client certificate for cn signed by ca ([cert, key] of #ca).
  # → [cert PEM, key PEM]
  def client(ca, cn:)
    ca_cert, ca_key = ca
    key = self.key
    cert = OpenSSL::X509::Certificate.new
    cert.version = 2
    cert.serial = rand(1 << 60)
    cert.subject = OpenSSL::X509::Name.parse("/CN=#{cn}/O=Oribi Tests")
    cert.issuer = ca_cert.subject
    cert.public_key = key
    cert.not_before = Time.now - 60
    cert.not_after = Time.now + 86_400
    ext = OpenSSL::X509::ExtensionFactory.new(cert, ca_cert)
    cert.add_extension(ext.create_extension("extendedKeyUsage", "clientAuth"))
    cert.sign(ca_key, "SHA256")
    [cert.to_pem, key.private_to_pem]
  end

  # Writes a pair into dir as NAME.crt and NAME.key. → [cert path, key path]
  def write(dir, name, pair = self_signed)
    paths = [File.join(dir, "#{name}.crt"), File.join(dir, "#{name}.key")]
    paths.zip(pair).each { |path, pem| File.write(path, pem) }
    paths
  end
end

# An SSLSocket as HTTPClient reads a socket: read_nonblock and
# wait_readable (for the server's bytes, not for TLS records that carry
# none, as the tickets a TLS 1.3 server sends after the handshake), write.
class TLSClient
  attr_reader :ssl

  # verify: the certificate PEM to trust, else none checked.
  # cert, key: a client certificate to present (PEM).
  # sni: the server name sent (default localhost).
  def self.open(port, host: "127.0.0.1", trust: nil, session: nil, cert: nil, key: nil, sni: "localhost", timeout: 10)
    tcp = Socket.tcp(host, port, connect_timeout: timeout)
    ctx = OpenSSL::SSL::SSLContext.new
    if trust
      ctx.verify_mode = OpenSSL::SSL::VERIFY_PEER
      ctx.cert_store = OpenSSL::X509::Store.new.tap { |s| s.add_cert(OpenSSL::X509::Certificate.new(trust)) }
    else
      ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
    end
    ctx.alpn_protocols = ["http/1.1"]
    if cert
      ctx.cert = OpenSSL::X509::Certificate.new(cert)
      ctx.key = OpenSSL::PKey.read(key)
    end
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx)
    ssl.hostname = sni
    ssl.session = session if session
    ssl.sync_close = true
    ssl.connect_nonblock(exception: false).then do |r|
      until r == ssl
        (r == :wait_writable ? tcp.wait_writable(timeout) : tcp.wait_readable(timeout)) or raise "TLS handshake timed out"
        r = ssl.connect_nonblock(exception: false)
      end
    rescue StandardError
      ssl.close
      raise
    end
    new(ssl)
  end

  def initialize(ssl)
    @ssl = ssl
    @ahead = +"" # read by wait_readable, not yet returned
  end

  def write(data) = @ssl.write(data)

  def read_nonblock(max, **_exception_false)
    return @ahead.slice!(0, max) unless @ahead.empty?

    r = @ssl.read_nonblock(max, exception: false)
    r == :wait_writable ? :wait_readable : r
  rescue OpenSSL::SSL::SSLError, EOFError, Errno::ECONNRESET
    nil
  end

  # self once the server's bytes (or its end) can be read, nil after timeout.
  def wait_readable(timeout)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      return self unless @ahead.empty?

      r = read_nonblock(16_384)
      return self if r.nil?
      next @ahead << r if r.is_a?(String)

      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      return nil if left <= 0 || !@ssl.to_io.wait_readable(left)
    end
  end
  def close = @ssl.close
  def closed? = @ssl.closed?
  def peer_cert = @ssl.peer_cert
end
