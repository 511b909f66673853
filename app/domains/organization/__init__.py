"""Who is asking: keys, projects, admin keys, open mode, the audit log."""
