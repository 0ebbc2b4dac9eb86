# Slim CPU image serving one environment over OpenEnv (HTTP, WebSocket sessions, MCP, /web page).
#   docker build -t fincrime-env . && docker run -p 8000:8000 -e ENV_NAME=aml fincrime-env
# Only the server's dependencies are installed (requirements-server.txt): no torch, no TRL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    ENV_NAME=aml \
    PORT=8000 \
    MAX_CONCURRENT_ENVS=64 \
    SESSION_TIMEOUT=600

RUN useradd --create-home --uid 1000 app
WORKDIR /app

COPY requirements-server.txt ./
RUN python -m venv /opt/venv && pip install --no-cache-dir -r requirements-server.txt

COPY env/ ./env/
COPY openenv.yaml ./

USER app
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '8000'), timeout=4)"

CMD ["sh", "-c", "exec python -m env.server --env \"$ENV_NAME\" --host 0.0.0.0 --port \"$PORT\" --max-concurrent-envs \"$MAX_CONCURRENT_ENVS\" --session-timeout \"$SESSION_TIMEOUT\""]
