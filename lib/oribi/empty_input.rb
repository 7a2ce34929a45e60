# frozen_string_literal: true

module Oribi
  # rack.input of every request without a body: one frozen object per
  # process that answers as a read-only IO at its end does, and keeps no
  # state, so nothing one request does to it (close it, change its
  # encoding, read past its end, give it an instance variable) reaches
  # another. A request with a body gets a StringIO or a File of its own.
  class EmptyInput
    def read(length = nil, buffer = nil)
      raise ArgumentError, "negative length #{length} given" if length&.negative?

      buffer = buffer ? buffer.clear : String.new(encoding: Encoding::BINARY)
      length&.positive? ? nil : buffer
    end

    def gets(*) = nil
    def getc = nil
    def getbyte = nil
    def readpartial(*) = raise(EOFError, "end of file reached")
    def read_nonblock(_length, _buffer = nil, exception: true) = exception ? readpartial : nil
    def each(*) = block_given? ? self : enum_for(:each)
    alias each_line each
    def rewind = 0
    def seek(*) = 0
    def pos = 0
    alias tell pos
    def size = 0
    alias length size
    def eof? = true
    alias eof eof?
    # Closing it tells the server no more input is wanted: there is none.
    def close = nil
    def closed? = false
    def close_read = nil
    def binmode = self
    def binmode? = true
    def set_encoding(*) = self
    def external_encoding = Encoding::BINARY
    def internal_encoding = nil
    def string = String.new(encoding: Encoding::BINARY)

    INSTANCE = new.freeze
  end
end
