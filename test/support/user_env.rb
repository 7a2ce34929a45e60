# frozen_string_literal: true

# The environment of a user's shell, for a process that makes a bundle of
# its own (a release's Gemfile, an app's): none of this run's Bundler (its
# Gemfile, lock, settings, RUBYOPT), but the gems this run was given, found
# where its own Bundler found them. After the README's `bundle install`
# those are the system's gem directories; under a configured path
# (vendor/bundle, BUNDLE_PATH in .ci/rubies' chroots) only that path, which
# Bundler then makes the whole of GEM_PATH. The new bundle reads them as
# system gems: a `path` of its own would look in a folder nobody filled.
def user_env(extra = {})
  env = ENV.keys.grep(/\A(BUNDLE_|BUNDLER_|RUBYOPT\z|RUBYLIB\z|GEM_)/).to_h { |k| [k, nil] }
  gems = [(Bundler.bundle_path.to_s if defined?(Bundler) && Bundler.respond_to?(:bundle_path)), *Gem.path].compact.uniq
  env.merge("GEM_PATH" => gems.join(File::PATH_SEPARATOR), "BUNDLE_PATH__SYSTEM" => "true").merge(extra)
end
