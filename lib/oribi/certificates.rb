# frozen_string_literal: true

module Oribi
  # TLS listeners' certificates, read again without a restart: when their
  # files change (certbot, cert-manager and the like write new ones in
  # place or swap a symlink), looked at once a second, and on HUP (a
  # deploy hook's `kill -HUP`). The master makes the new TLSContexts, so the
  # workers still share one set of session ticket keys, and replaces its
  # workers one at a time (a rolling restart): connections open on the old
  # certificate finish there, new handshakes get the new one, none is
  # dropped. Files that do not do (half written, a key that does not match)
  # are logged and the old certificate stays until the next change.
  class Certificates
    CHECK_EVERY = 1.0

    def initialize(listeners)
      @listeners = listeners.all.select(&:tls_context)
      @seen = stamps
      @check_at = nil
    end

    def any? = @listeners.any?

    # When the master must look next; nil without TLS listeners.
    def deadline(now) = (@check_at ||= now + CHECK_EVERY if any?)

    # True once for files that changed since the last look, each re-read
    # and in place (then the master rolls its workers); false otherwise.
    def changed?(now)
      return false unless any? && now >= deadline(now)

      @check_at = now + CHECK_EVERY
      return false if (now_seen = stamps) == @seen

      @seen = now_seen
      reload("the certificate files changed")
    end

    # Reads every TLS listener's files again: true when all were read; on
    # any failure none is replaced.
    def reload(why)
      fresh = @listeners.map { |l| [l, Listeners.tls_context(l.uri, l.tls)] }
      fresh.each do |l, ctx|
        l.tls_context = ctx
        Log.info("#{why}: #{l.uri.split('?').first} now presents #{ctx.subject}, until #{ctx.not_after&.strftime('%F')}")
      end
      true
    rescue ArgumentError => e
      Log.error("#{why}, but the TLS listeners keep their certificates: #{e.message}")
      false
    end

    private

    # The files' identities and mtimes (a symlink swapped to a new file
    # counts), by path.
    def stamps
      @listeners.flat_map { |l| [*l.tls.values_at("cert", "key", "ca"), *l.tls.fetch("sni", []).flatten].compact }.uniq.to_h do |path|
        st = File.stat(path)
        [path, [st.ino, st.mtime, st.size]]
      rescue SystemCallError
        [path, nil]
      end
    end
  end
end
