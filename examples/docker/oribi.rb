# frozen_string_literal: true

# config/oribi.rb of the container of examples/docker/Dockerfile, run by
# `./bin/thrust ./bin/rails server` (RACKUP_HANDLER=oribi) and probed by
# examples/kubernetes/deployment.yaml. Left to their defaults: workers, one
# per CPU the container may use (its CPU limit), and max_worker_memory,
# its memory limit ÷ workers (docs/DEPLOYMENT.md).

# Behind Thruster only: it proxies to localhost:$PORT (it sets PORT).
bind "tcp://127.0.0.1:#{ENV.fetch('PORT', 3000)}"

# /readyz and /healthz for the probes, over a unix socket only the app's
# user can reach: no token, nothing exposed on the pod's address.
control "unix://#{File.expand_path('tmp/oribi-control.sock')}"

# On TERM: readiness 503 at once, 5 s more of serving while the pod leaves
# the Service's endpoints, then the drain. 20 s in all from TERM, so that
# with Thruster's own stop (5 s at most) the pod is gone within its 30 s
# terminationGracePeriodSeconds.
shutdown_delay 5
shutdown_timeout 20

# One JSON object per line for the cluster's log collector (Thruster
# logs each request itself).
log_format "json"
