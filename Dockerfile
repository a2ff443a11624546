# One image for every opsconsole process (web, worker, controller); the command picks the process.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# Graphviz: the console lays out state machine diagrams with `dot` (without it, a simpler layout)
RUN apt-get update && apt-get install -y --no-install-recommends graphviz && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY opsconsole ./opsconsole
COPY reconcilers ./reconcilers
COPY kubesim ./kubesim
RUN pip install --no-cache-dir .
COPY . .
RUN SECRET_KEY=build DATABASE_URL=sqlite:////tmp/build.sqlite3 \
    DJANGO_SETTINGS_MODULE=opsconsole.settings_production python manage.py collectstatic --noinput
RUN useradd --system --uid 10001 opsconsole && mkdir -p /data && chown opsconsole /data
USER opsconsole
EXPOSE 8000 9101 9102
