# frozen_string_literal: true

# The release this code is (RELEASE, beside config.ru): read once at boot,
# so that a job shows which boot's code ran it.
JOBS_RELEASE = File.read(Rails.root.join("RELEASE")).strip
