"""Operations tasks: expense triage, meeting scheduling and incident response."""
