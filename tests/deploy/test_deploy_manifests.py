"""Offline checks of the deployment files in deploy/: schemas, and cross-checks against the code.

- compose.yaml: the Compose Specification JSON schema (vendored offline by check-jsonschema),
  plus what a schema cannot see (depends_on conditions, mounts, volumes, secrets, variables).
- k8s/*.yaml: the Kubernetes OpenAPI schemas (offline, kubernetes-validate) in strict mode,
  and the kustomize rendering when kubectl is installed.
- nginx.conf: parsed with crossplane (directive names, contexts, argument counts);
  ``nginx -t`` when an nginx binary is installed.
- Every ``shortlist`` command parses with the real CLI parser; probe paths are the app's
  routes; ports agree; environment variables are the ones the code reads; files named in
  commands exist where the mounts put them; the doc's excerpts are the files' text.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from deploy_files import (
    COMPOSE_FILE,
    DEPLOY,
    DOCKERFILE,
    ENV_EXAMPLE,
    K8S_DIR,
    KUSTOMIZATION,
    NGINX_CONF,
    ROOT,
    ShortlistCommand,
    argv,
    compose_mounts,
    compose_variables,
    k8s_doc,
    load_compose,
    load_k8s,
    option,
    parse_cli,
    pod_spec,
    resolve_mount,
    shortlist_commands,
)

K8S_VERSIONS = ["1.30.0", "latest"]
REPLICAS = ("shortlist-a", "shortlist-b")


# -- compose ------------------------------------------------------------------------------


def _compose_schema() -> dict[str, Any]:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema: dict[str, Any] = json.loads(schema_file.read_text(encoding="utf-8"))
    return schema


def _compose_errors(data: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(_compose_schema())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


def test_compose_matches_the_compose_specification() -> None:
    assert _compose_errors(load_compose()) == []


@pytest.mark.slow  # runs the validator as a process
def test_check_jsonschema_accepts_the_compose_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d["services"]["postgres"].update(imag="postgres:17"),
        lambda d: d["services"]["shortlist-a"]["depends_on"]["postgres"].update(condition="service_healthy_"),
        lambda d: d["services"]["lb"].update(ports="8080:8080"),
        lambda d: d["services"]["shortlist-a"]["healthcheck"].update(interval=5),
    ],
    ids=["unknown-key", "bad-condition", "ports-not-a-list", "interval-not-a-duration"],
)
def test_the_compose_schema_catches_mistakes(breakage: Any) -> None:
    data = copy.deepcopy(load_compose())
    breakage(data)
    assert _compose_errors(data)


def test_compose_dependencies_volumes_secrets_and_variables_hold_together() -> None:
    compose = load_compose()
    services: dict[str, Any] = compose["services"]
    for name, service in services.items():
        assert "image" in service, f"{name}: no image"
        for dep, how in (service.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = how["condition"] if isinstance(how, dict) else "service_started"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy; it has no healthcheck"
            if condition == "service_completed_successfully":
                assert services[dep].get("restart", "no") == "no", f"{dep} must be one-shot for {name} to wait on it"
        for target, source in compose_mounts(service).items():
            if source.startswith("secret:"):
                assert source.removeprefix("secret:") in compose["secrets"], f"{name}: undeclared secret {source}"
            elif source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: bind mount source {source} missing"
            else:
                assert source in compose["volumes"], f"{name}: undeclared volume {source} for {target}"
    # secrets are files the operator creates; git must not pick them up
    for secret in compose["secrets"].values():
        assert secret["file"].startswith("./secrets/")
    assert "secrets/" in (DEPLOY / ".gitignore").read_text(encoding="utf-8").split()
    # every interpolated variable is in .env.example, and required ones make compose fail loudly
    used = compose_variables(COMPOSE_FILE.read_text(encoding="utf-8"))
    example = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines() if "=" in line}
    assert used <= example, f"variables missing from .env.example: {used - example}"
    with pytest.raises(KeyError, match="PG_PASSWORD"):
        load_compose({})
    # both replicas are the same definition, built from this repository's Dockerfile
    assert services[REPLICAS[0]] == services[REPLICAS[1]]
    build = services[REPLICAS[0]]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert {s["image"] for s in services.values() if "build" in s} == {services[REPLICAS[0]]["image"]}


def test_replicas_serve_the_corpus_the_index_service_builds() -> None:
    services = load_compose()["services"]
    index_args = argv(services["index"]["command"])
    index_mounts = compose_mounts(services["index"])
    built = resolve_mount(option(index_args, "--path"), index_mounts)
    docs = resolve_mount(option(index_args, "--docs"), index_mounts)
    assert docs is not None and (DEPLOY / docs[0] / docs[1]).is_dir()
    assert any((DEPLOY / docs[0] / docs[1]).glob("*.md"))
    for name in REPLICAS:
        args = argv(services[name]["command"])
        served = resolve_mount(option(args, "--corpus-index"), compose_mounts(services[name]))
        assert served == built, f"{name} serves {served}, the index service writes {built}"
        assert "depends_on" in services[name] and "index" in services[name]["depends_on"]
    assert option(index_args, "--url").startswith("http://qdrant-1:")


# -- the shortlist commands against the real CLI ----------------------------------------


COMMANDS = list(shortlist_commands())
SERVE = [c for c in COMMANDS if c.subcommand == "serve"]
OTHERS = [c for c in COMMANDS if c.subcommand != "serve"]


def test_the_deployments_run_only_serve_and_index_build() -> None:
    assert SERVE and OTHERS
    assert {c.subcommand for c in OTHERS} == {"index"}


@pytest.mark.parametrize("cmd", SERVE, ids=[c.where for c in SERVE])
def test_serve_commands_parse_with_the_real_cli(cmd: ShortlistCommand) -> None:
    from shortlist.cli import _serve as serve

    args = parse_cli(cmd.argv[1:])
    assert args.command == "serve" and args.func is serve.run
    assert args.workers >= 1 and args.catalog and args.corpus_index and args.config


@pytest.mark.parametrize("cmd", OTHERS, ids=[c.where for c in OTHERS])
def test_index_commands_parse_with_the_real_cli(cmd: ShortlistCommand) -> None:
    args = parse_cli(cmd.argv[1:])
    assert args.command == "index"
    assert args.index_command == "build" and args.backend == "qdrant" and args.url


def test_every_deployment_runs_both_kinds_of_command() -> None:
    where = {(c.where.split()[0], c.subcommand) for c in COMMANDS}
    assert where == {("compose.yaml", "serve"), ("compose.yaml", "index"), ("index-job.yaml", "index")} | {
        ("shortlist.yaml", "serve")
    }


def _routes() -> dict[str, Any]:
    from shortlist.server import ServerSettings, create_app

    paths: dict[str, Any] = create_app(ServerSettings()).openapi()["paths"]
    return paths


def test_probes_and_ports_match_the_app() -> None:
    from shortlist.server._middleware import HEALTH_PATHS

    routes = _routes()
    services = load_compose()["services"]
    for name in REPLICAS:
        # probes ask the health listener (--health-port), which serves only /healthz and /readyz
        health_port = option(argv(services[name]["command"]), "--health-port")
        check = " ".join(services[name]["healthcheck"]["test"])
        url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", check)
        assert url is not None and url.group(1) == health_port, f"{name}: healthcheck port is not --health-port"
        assert "get" in routes[url.group(2)] and url.group(2) in HEALTH_PATHS
    deployment = k8s_doc("Deployment", "shortlist")
    (container,) = pod_spec(deployment)["containers"]
    k8s_args = [*container["command"], *container["args"]]
    k8s_health = int(option(k8s_args, "--health-port"))
    assert k8s_health != int(option(k8s_args, "--port"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert "get" in routes[get["path"]], f"{probe}: {get['path']} is not a GET route of the app"
        assert get["path"] in HEALTH_PATHS and ports[get["port"]] == k8s_health
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = k8s_doc("Service", "shortlist")
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert all(ports[p["targetPort"]] != k8s_health for p in service["spec"]["ports"])  # probes only
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pdb = k8s_doc("PodDisruptionBudget", "shortlist")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_environment_variables_are_the_ones_the_code_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from shortlist.server._settings import ENV_API_KEYS

    description = json.loads((K8S_DIR / "shortlist-index.json").read_text(encoding="utf-8"))
    index_defaults = parse_cli(["index", "build", "--docs", "d", "--path", "p"])
    known = {"SHORTLIST_MEMORY_URL", ENV_API_KEYS, description["api_key_env"], index_defaults.api_key_env}
    # SHORTLIST_MEMORY_URL really is what `serve --memory` defaults to
    monkeypatch.setenv("SHORTLIST_MEMORY_URL", "postgresql://u@h:5432/db")
    assert parse_cli(["serve"]).memory == "postgresql://u@h:5432/db"
    used: set[str] = set()
    for name in (*REPLICAS, "index"):
        used |= set(load_compose()["services"][name].get("environment", {}))
    for _, doc in load_k8s():
        if doc["kind"] in ("Deployment", "Job"):
            used |= {e["name"] for c in pod_spec(doc)["containers"] for e in c.get("env", [])}
    assert used <= known, f"set but never read: {used - known}"
    assert "SHORTLIST_MEMORY_URL" in used


def test_files_named_in_commands_are_where_the_mounts_put_them() -> None:
    from shortlist._config import load_runtime_config
    from shortlist.adapters._catalog import load_catalog

    services = load_compose()["services"]
    for name in REPLICAS:
        args = argv(services[name]["command"])
        mounts = compose_mounts(services[name])
        for path in (option(args, "--config"), option(args, "--catalog").split("=", 1)[1]):
            found = resolve_mount(path, mounts)
            assert found is not None and found[0].startswith("."), f"{name}: {path} is on no bind mount"
            assert (DEPLOY / found[0] / found[1]).is_file()
        keys = resolve_mount(option(args, "--api-keys-file"), mounts)
        assert keys == ("secret:shortlist-keys", "")
    assert load_runtime_config(DEPLOY / "etc" / "runtime.yaml").spec.tool_selector
    assert len(load_catalog(DEPLOY / "etc" / "tools.json")) > 0
    # Kubernetes: the ConfigMap items put each file where the args name it
    deployment = k8s_doc("Deployment", "shortlist")
    spec = pod_spec(deployment)
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    files: dict[str, str] = {}  # container path -> ConfigMap/Secret key
    for m in container["volumeMounts"]:
        source = volumes[m["name"]].get("configMap") or volumes[m["name"]].get("secret")
        for item in source["items"]:
            files[f"{m['mountPath']}/{item['path']}"] = item["key"]
    args = container["args"]
    assert files[option(args, "--config")] == "runtime.yaml"
    assert files[option(args, "--catalog").split("=", 1)[1]] == "tools.json"
    assert files[option(args, "--api-keys-file")] == "keys"
    assert files[option(args, "--corpus-index") + "/shortlist-index.json"] == "shortlist-index.json"


def test_the_kubernetes_index_description_is_what_the_job_builds() -> None:
    from shortlist.retrieval._backends.opening import embedder_by_name

    job = k8s_doc("Job", "shortlist-index")
    (container,) = pod_spec(job)["containers"]
    args = parse_cli(container["args"])
    expected = {
        "backend": args.backend,
        "embedder": embedder_by_name(args.embedder).model_name,
        "collection": args.collection,
        "url": args.url,
        "api_key_env": args.api_key_env,
    }
    assert json.loads((K8S_DIR / "shortlist-index.json").read_text(encoding="utf-8")) == expected
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[args.docs] == "docs"


# -- Kubernetes schemas -------------------------------------------------------------------


K8S_DOCS = load_k8s()


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("doc", [d for _, d in K8S_DOCS], ids=[f"{p.name}:{d['kind']}" for p, d in K8S_DOCS])
def test_kubernetes_manifests_match_the_api_schemas(doc: dict[str, Any], version: str) -> None:
    import kubernetes_validate

    if version == "latest":
        version = kubernetes_validate.latest_version()
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{doc['kind']}: {'/'.join(map(str, exc.path))}: {exc.message}") from None


def test_the_kubernetes_schemas_catch_mistakes() -> None:
    import kubernetes_validate

    doc = copy.deepcopy(k8s_doc("Deployment", "shortlist"))
    container = pod_spec(doc)["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    doc = copy.deepcopy(k8s_doc("Deployment", "shortlist"))
    pod_spec(doc)["containers"][0]["ports"][0]["containerPort"] = "8080"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_kustomization_generates_every_configmap_key_the_pods_mount() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text(encoding="utf-8"))
    assert sorted(kustomization["resources"]) == sorted(f"k8s/{p.name}" for p in K8S_DIR.glob("*.yaml"))
    generated = {g["name"]: {Path(f).name for f in g["files"]} for g in kustomization["configMapGenerator"]}
    for g in kustomization["configMapGenerator"]:
        assert all((DEPLOY / f).is_file() for f in g["files"])
    assert generated["shortlist-docs"] == {p.name for p in (DEPLOY / "etc" / "docs").iterdir()}
    for _, doc in K8S_DOCS:
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        for volume in pod_spec(doc)["volumes"]:
            if "configMap" in volume:
                cm = volume["configMap"]
                assert cm["name"] in generated, f"ConfigMap {cm['name']} is not generated"
                assert {i["key"] for i in cm.get("items", [])} <= generated[cm["name"]]


@pytest.mark.slow  # runs the validator as a process
def test_kustomize_renders_valid_manifests() -> None:
    import kubernetes_validate

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize rendering is not checked (the files still are)")
    done = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rendered = [d for d in yaml.safe_load_all(done.stdout) if d]
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == ["ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service"]
    configmaps = {d["metadata"]["name"] for d in rendered if d["kind"] == "ConfigMap"}
    for doc in rendered:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
        if doc["kind"] in ("Deployment", "Job"):
            for volume in pod_spec(doc)["volumes"]:
                if "configMap" in volume:
                    assert volume["configMap"]["name"] in configmaps  # hashed names rewritten


# -- nginx ------------------------------------------------------------------------------


def _nginx_main(tmp: Path, conf: Path) -> Path:
    """A main nginx.conf that includes ``conf`` in the http context, as the nginx image does."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    temp = "\n".join(f"  {d}_temp_path {tmp}/{d};" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    main = tmp / "main.conf"
    main.write_text(
        f"user {user};\npid {tmp}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
        f"http {{\n{temp}\n  access_log off;\n  include {conf};\n}}\n",
        encoding="utf-8",
    )
    return main


def _nginx_parsed(tmp: Path) -> list[dict[str, Any]]:
    import crossplane

    payload = crossplane.parse(str(_nginx_main(tmp, NGINX_CONF)), check_ctx=True, check_args=True, comments=False)
    assert payload["status"] == "ok", payload["errors"]
    (conf,) = [c for c in payload["config"] if Path(c["file"]) == NGINX_CONF]
    parsed: list[dict[str, Any]] = conf["parsed"]
    return parsed


def _block(items: list[dict[str, Any]], directive: str) -> list[dict[str, Any]]:
    return [i for i in items if i["directive"] == directive]


def _size(value: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    return int(value[:-1]) * units[value[-1].lower()] if value[-1].lower() in units else int(value)


def test_nginx_conf_parses_and_points_at_the_replicas(tmp_path: Path) -> None:
    parsed = _nginx_parsed(tmp_path)
    (upstream,) = _block(parsed, "upstream")
    (server,) = _block(parsed, "server")
    (location,) = _block(server["block"], "location")
    services = load_compose()["services"]
    serve = parse_cli(argv(services[REPLICAS[0]]["command"])[1:])
    targets = {s["args"][0] for s in _block(upstream["block"], "server")}
    assert targets == {f"{name}:{serve.port}" for name in REPLICAS}
    (proxy_pass,) = _block(location["block"], "proxy_pass")
    assert proxy_pass["args"] == [f"http://{upstream['args'][0]}"]
    (listen,) = _block(server["block"], "listen")
    published = {p.split(":")[-1] for p in services["lb"]["ports"]}
    assert published == {listen["args"][0]}
    (body,) = _block(server["block"], "client_max_body_size")
    assert _size(body["args"][0]) >= serve.max_body_bytes
    (read_timeout,) = _block(location["block"], "proxy_read_timeout")
    assert float(read_timeout["args"][0].rstrip("s")) > serve.timeout
    mounts = compose_mounts(services["lb"])
    assert mounts["/etc/nginx/conf.d/default.conf"] == "./nginx.conf"
    # a per-client connection limit (issue 27, item 5): the replicas see only nginx and leave it to it
    (zone,) = _block(parsed, "limit_conn_zone")
    assert zone["args"][0] == "$binary_remote_addr"
    (limit,) = _block(server["block"], "limit_conn")
    assert zone["args"][1] == f"zone={limit['args'][0]}:10m" and int(limit["args"][1]) >= 1
    assert serve.max_connections_per_client == 0


@pytest.mark.slow  # runs the validator as a process
def test_nginx_accepts_the_conf(tmp_path: Path) -> None:
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if nginx is None:
        pytest.skip("no nginx binary (apt-get install nginx-light): nginx.conf is checked by crossplane only")
    # nginx resolves upstream names at load time; compose's names exist only on its network
    conf = tmp_path / "default.conf"
    text = NGINX_CONF.read_text(encoding="utf-8")
    for name in REPLICAS:
        text = text.replace(f"{name}:", "127.0.0.1:")
    conf.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-e", "stderr", "-c", str(_nginx_main(tmp_path, conf))],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


# -- the image ----------------------------------------------------------------------------


def test_the_dockerfile_installs_this_project_with_the_service_extras() -> None:
    from packaging.specifiers import SpecifierSet

    text = DOCKERFILE.read_text(encoding="utf-8")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    base = re.search(r"^FROM python:(\d+\.\d+)", text, re.M)
    assert base is not None and base.group(1) + ".0" in SpecifierSet(pyproject["project"]["requires-python"])
    extras = re.search(r'pip install "\.\[([a-z,]+)\]"', text)
    assert extras is not None and set(extras.group(1).split(",")) == {"server", "postgres", "qdrant"}
    assert set(extras.group(1).split(",")) <= set(pyproject["project"]["optional-dependencies"])
    # COPY sources exist and the Dockerfile's ignore file lets them into the build context
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    for line in re.findall(r"^COPY (.+)$", text, re.M):
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: missing"
            assert f"!{source.rstrip('/')}" in {i.rstrip("/") for i in ignore}, f"{source} is ignored by the build"
    assert pyproject["project"]["readme"] in text
    # the image's user is the one Kubernetes runs as
    user = re.search(r"^USER (\d+)$", text, re.M)
    assert user is not None
    for _, doc in K8S_DOCS:
        if doc["kind"] in ("Deployment", "Job"):
            assert pod_spec(doc)["securityContext"]["runAsUser"] == int(user.group(1))


def test_qdrant_client_and_server_versions_are_compatible() -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    images = {s["image"] for s in load_compose()["services"].values() if s["image"].startswith("qdrant/")}
    (image,) = images
    server = Version(image.split(":v", 1)[1])
    pin = re.search(r'"qdrant-client([^"]+)"', DOCKERFILE.read_text(encoding="utf-8"))
    assert pin is not None
    spec = SpecifierSet(pin.group(1))
    client = Version(f"{server.major}.{server.minor}.0")
    assert client in spec, f"qdrant-client{spec} does not admit {client} for server {server}"
    assert Version(f"{server.major}.{server.minor + 2}.0") not in spec  # the client warns past one minor


# -- the doc ------------------------------------------------------------------------------


def test_doc_excerpts_are_the_files_text_and_links_exist() -> None:
    doc = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    excerpts = re.findall(r"```\w*\n# (deploy/\S+)[^\n]*\n(.*?)```", doc, re.S)
    assert excerpts, "docs/deploy.md quotes no deploy file"
    for path, body in excerpts:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert body in text, f"docs/deploy.md's excerpt of {path} differs from the file"
    for link in set(re.findall(r"\]\((\.\./deploy/[^)#]+)\)", doc)):
        assert (ROOT / "docs" / link).resolve().exists(), f"broken link {link}"
