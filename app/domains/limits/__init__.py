"""What a project may use: byte and batch quotas, rate and token limits, model permissions, usage and costs."""
