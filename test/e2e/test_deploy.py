"""deploy/: the Dockerfile and the Kubernetes/KServe manifests agree with each other, with the
Kubernetes API schemas, and with a real inferx-serve.

Schemas: every core manifest is validated, strict (unknown fields are errors), against the
Kubernetes OpenAPI schemas that `kubernetes-validate` bundles (no network). The KServe
InferenceService (a CRD, not in those schemas) is checked against
deploy/kserve/inferenceservice.schema.json, and its predictor's PodSpec fields as a core Pod.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from packaging.version import Version


ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_FILES = sorted((DEPLOY / "k8s").glob("*.yaml"))
KSERVE_FILE = DEPLOY / "kserve" / "inferenceservice.yaml"
KSERVE_SCHEMA = DEPLOY / "kserve" / "inferenceservice.schema.json"

HEALTH_PATHS = {"/v2/health/live", "/v2/health/ready"}
REQUESTS_COUNTER = "inference_requests_total"
# the oldest Kubernetes these manifests claim to work on (or the oldest schemas bundled, if newer),
# and the newest schemas bundled
_BUNDLED = kubernetes_validate.utils.all_versions()
K8S_VERSIONS = (next(v for v in _BUNDLED if Version(v) >= Version("1.27")), _BUNDLED[-1])


# -- loading ----------------------------------------------------------------------------------

def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _api_objects() -> list[tuple[str, dict]]:
    """(file name, object) of every Kubernetes API object under deploy/k8s (not kustomize's file)."""
    return [(p.name, d) for p in K8S_FILES for d in _docs(p) if d.get("kind") != "Kustomization"]


def _one(kind: str) -> dict:
    found = [d for _, d in _api_objects() if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} under deploy/k8s, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def deployment() -> dict:
    return _one("Deployment")


@pytest.fixture(scope="module")
def isvc() -> dict:
    (doc,) = _docs(KSERVE_FILE)
    return doc


@pytest.fixture(scope="module")
def dockerfile():
    import dockerfile as dockerfile_parser  # BuildKit's own parser (Go), via the `dockerfile` package

    return dockerfile_parser.parse_file(str(DEPLOY / "Dockerfile"))


def _instructions(commands, name: str) -> list:
    return [c for c in commands if c.cmd.upper() == name]


def _final_stage(commands) -> list:
    starts = [i for i, c in enumerate(commands) if c.cmd.upper() == "FROM"]
    return list(commands[starts[-1]:])


def _flag(argv, flag: str) -> str:
    assert flag in argv, f"{flag} not in {argv}"
    return argv[argv.index(flag) + 1]


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _isvc_container(isvc: dict) -> dict:
    return next(c for c in isvc["spec"]["predictor"]["containers"] if c["name"] == "kserve-container")


def _port_number(container: dict, port) -> int:
    """A probe's or Service's port (a number, or the name of one of the container's ports)."""
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    assert port in named, f"port name {port!r} is not one of the container's ports {sorted(named)}"
    return named[port]


def _probes(container: dict) -> dict:
    return {kind: container[kind] for kind in ("startupProbe", "readinessProbe", "livenessProbe") if kind in container}


# -- schemas ----------------------------------------------------------------------------------

def test_every_deploy_file_is_covered():
    names = {p.name for p in K8S_FILES}
    assert {"deployment.yaml", "service.yaml", "hpa.yaml", "prometheus-adapter-rules.yaml"} <= names
    assert {d["kind"] for _, d in _api_objects()} >= {"Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name, obj", _api_objects(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_manifest_is_valid_kubernetes(name, obj, version):
    kubernetes_validate.validate(obj, version, strict=True)


def test_kustomization_lists_the_app_manifests():
    (kustomization,) = _docs(DEPLOY / "k8s" / "kustomization.yaml")
    resources = kustomization["resources"]
    assert all((DEPLOY / "k8s" / r).is_file() for r in resources)
    assert {"deployment.yaml", "service.yaml", "hpa.yaml"} <= set(resources)
    # the adapter's ConfigMap lives in the adapter's namespace: not applied with the app
    assert "prometheus-adapter-rules.yaml" not in resources
    image = _container(_one("Deployment"))["image"].rsplit(":", 1)[0]
    assert [i["name"] for i in kustomization.get("images", [])] in ([], [image])


BROKEN = {
    "port not a number": ("Deployment", lambda d: _container(d)["ports"][0].update(containerPort="http")),
    "misspelt field": ("Deployment", lambda d: _container(d).update(readinesProbe=_container(d).pop("readinessProbe"))),
    "no selector": ("Deployment", lambda d: d["spec"].pop("selector")),
    "replicas not an integer": ("HorizontalPodAutoscaler", lambda h: h["spec"].update(minReplicas="two")),
    "unknown metric type": ("HorizontalPodAutoscaler", lambda h: h["spec"]["metrics"][1].update(type=7)),
    "service port out of type": ("Service", lambda s: s["spec"]["ports"][0].update(port=[8000])),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_validator_rejects_a_broken_copy(what):
    kind, breaks = BROKEN[what]
    obj = copy.deepcopy(_one(kind))
    kubernetes_validate.validate(obj, K8S_VERSIONS[-1], strict=True)  # the original passes ...
    breaks(obj)
    with pytest.raises(kubernetes_validate.ValidationError):  # ... the broken copy does not
        kubernetes_validate.validate(obj, K8S_VERSIONS[-1], strict=True)


def _kserve_schema() -> dict:
    schema = json.loads(KSERVE_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def _predictor_as_pod(isvc: dict, schema: dict) -> dict:
    """The predictor's PodSpec fields (all but ComponentExtensionSpec's) as a core v1 Pod."""
    extension = set(schema["$defs"]["customPredictor"]["properties"]) - {"containers"}
    spec = {k: v for k, v in isvc["spec"]["predictor"].items() if k not in extension}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": isvc["metadata"]["name"]}, "spec": spec}


def test_inferenceservice_matches_its_schema_and_its_pod_spec_is_valid(isvc):
    schema = _kserve_schema()
    jsonschema.Draft202012Validator(schema).validate(isvc)
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(_predictor_as_pod(isvc, schema), version, strict=True)
    predictor = isvc["spec"]["predictor"]
    assert predictor["minReplicas"] <= predictor["maxReplicas"]
    env = {e["name"]: e.get("value") for e in _isvc_container(isvc).get("env", [])}
    assert env["PROTOCOL"] == "v2"  # a custom predictor's protocolVersion
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


KSERVE_BROKEN = {
    "no containers": (lambda i: i["spec"]["predictor"].pop("containers"), "schema"),
    "no kserve-container": (lambda i: _isvc_container(i).update(name="server"), "schema"),
    "protocol v3": (lambda i: _isvc_container(i)["env"][0].update(value="v3"), "schema"),
    "bad scaleMetric": (lambda i: i["spec"]["predictor"].update(scaleMetric="gpu"), "schema"),
    "framework and container": (lambda i: i["spec"]["predictor"].update(model={"modelFormat": {"name": "onnx"}}), "schema"),
    "wrong kind": (lambda i: i.update(kind="InferenceServices"), "schema"),
    "misspelt pod field": (lambda i: _isvc_container(i).update(volumeMount=[]), "pod"),
    "port not a number": (lambda i: _isvc_container(i)["ports"][0].update(containerPort="8000"), "pod"),
}


@pytest.mark.parametrize("what", sorted(KSERVE_BROKEN))
def test_inferenceservice_checks_reject_a_broken_copy(isvc, what):
    breaks, where = KSERVE_BROKEN[what]
    schema = _kserve_schema()
    broken = copy.deepcopy(isvc)
    breaks(broken)
    if where == "schema":
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(broken)
    else:
        jsonschema.Draft202012Validator(schema).validate(broken)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(_predictor_as_pod(broken, schema), K8S_VERSIONS[-1], strict=True)


# -- autoscaling ------------------------------------------------------------------------------

def _adapter_rules() -> list[dict]:
    configmap = _one("ConfigMap")
    return yaml.safe_load(configmap["data"]["config.yaml"])["rules"]


def test_hpa_bounds_targets_and_scale_target(deployment):
    hpa = _one("HorizontalPodAutoscaler")
    spec = hpa["spec"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 12)
    assert deployment["spec"]["replicas"] == spec["minReplicas"] == 2
    ref = spec["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", deployment["metadata"]["name"])
    by_type = {m["type"]: m for m in spec["metrics"]}
    cpu = by_type["Resource"]["resource"]
    assert cpu["name"] == "cpu" and cpu["target"] == {"type": "Utilization", "averageUtilization": 70}
    # Utilization is a share of the request: without a CPU request the HPA cannot compute it
    assert "cpu" in _container(deployment)["resources"]["requests"]
    pods = by_type["Pods"]["pods"]
    assert pods["target"]["type"] == "AverageValue" and _quantity(pods["target"]["averageValue"]) > 0
    assert {"scaleUp", "scaleDown"} <= set(spec["behavior"])


def test_hpa_pods_metric_is_the_adapter_rules_output():
    metric = next(m["pods"]["metric"]["name"] for m in _one("HorizontalPodAutoscaler")["spec"]["metrics"]
                  if m["type"] == "Pods")
    rules = [r for r in _adapter_rules() if REQUESTS_COUNTER in r["seriesQuery"]]
    assert len(rules) == 1, "one adapter rule must read inference_requests_total"
    rule = rules[0]
    # the adapter names the metric by applying name.matches/name.as to the series name
    assert re.sub(rule["name"]["matches"], rule["name"]["as"], REQUESTS_COUNTER) == metric
    assert metric == "inference_requests_per_second"
    assert "rate(<<.Series>>{<<.LabelMatchers>>}" in rule["metricsQuery"]  # a per-second rate ...
    assert "by (<<.GroupBy>>)" in rule["metricsQuery"]  # ... per pod
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    assert rule["resources"]["overrides"]["namespace"] == {"resource": "namespace"}


def test_isvc_autoscaling_matches_the_hpa(isvc):
    hpa = _one("HorizontalPodAutoscaler")["spec"]
    predictor = isvc["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (hpa["minReplicas"], hpa["maxReplicas"])
    assert (predictor["scaleMetric"], predictor["scaleTarget"]) == ("cpu", 70)


# -- probes against a real server -------------------------------------------------------------

def test_probes_use_the_health_endpoints(deployment, isvc):
    for container in (_container(deployment), _isvc_container(isvc)):
        probes = _probes(container)
        assert set(probes) == {"startupProbe", "readinessProbe", "livenessProbe"}
        for kind, probe in probes.items():
            assert probe["httpGet"]["path"] in HEALTH_PATHS, (kind, probe)
            assert _port_number(container, probe["httpGet"]["port"]) == 8000, (kind, probe)
        assert probes["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        assert probes["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_probe_and_scrape_paths_answer_200_on_a_real_server(served_mlp, deployment, isvc):
    url = served_mlp
    paths = {p["httpGet"]["path"] for c in (_container(deployment), _isvc_container(isvc))
             for p in _probes(c).values()}
    paths.add(deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"])
    paths.add(isvc["metadata"]["annotations"]["prometheus.kserve.io/path"])
    assert paths == HEALTH_PATHS | {"/metrics"}
    for path in sorted(paths):
        assert _status(url + path) == 200, path
    assert _status(url + "/v2/health/nothing") == 404  # the check can fail


def _healthcheck_argv(commands) -> list[str]:
    (healthcheck,) = _instructions(_final_stage(commands), "HEALTHCHECK")
    assert healthcheck.json and healthcheck.value[0] == "CMD", healthcheck.original
    return list(healthcheck.value[1:])


def test_dockerfile_healthcheck_runs_against_a_real_server(served_mlp, dockerfile):
    """The HEALTHCHECK's own command, with its port pointed at the test server: exit 0; and
    pointed at a port where nothing listens: non-zero."""
    port = int(served_mlp.rsplit(":", 1)[1])
    argv = _healthcheck_argv(dockerfile)
    assert argv[:2] == ["python", "-c"]
    code = argv[2]
    assert "http://127.0.0.1:8000/v2/health/ready" in code
    ok = subprocess.run([sys.executable, "-c", code.replace(":8000/", f":{port}/")], capture_output=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-c", code.replace(":8000/", f":{port}/v2/nothing/")],
                         capture_output=True, timeout=60)
    assert bad.returncode != 0


def _infer_once(url: str, name: str) -> int:
    """One inference with zeros for every input (dynamic dims as 1); the HTTP status."""
    with urllib.request.urlopen(f"{url}/v2/models/{name}", timeout=30) as r:
        meta = json.loads(r.read())
    inputs = []
    for spec in meta["inputs"]:
        shape = [1 if d < 0 else d for d in spec["shape"]]
        count = 1
        for d in shape:
            count *= d
        inputs.append({"name": spec["name"], "shape": shape, "datatype": spec["datatype"], "data": [0] * count})
    req = urllib.request.Request(f"{url}/v2/models/{name}/infer", data=json.dumps({"inputs": inputs}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status


def test_the_request_counter_the_adapter_reads(served_mlp):
    """The adapter rule reads inference_requests_total: a counter with the model,
    model_version and status labels that counts a request."""
    from prometheus_client.parser import text_string_to_metric_families

    url = served_mlp
    assert _infer_once(url, "mlp") == 200
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        families = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
    family = families[REQUESTS_COUNTER.removesuffix("_total")]
    assert family.type == "counter"
    samples = [s for s in family.samples if s.name == REQUESTS_COUNTER]
    assert samples, f"{REQUESTS_COUNTER} has no sample after a request"
    for sample in samples:
        assert {"model", "model_version", "status"} <= set(sample.labels), sample.labels
    assert sum(s.value for s in samples if s.labels["model"] == "mlp" and s.labels["status"] == "200") >= 1


# -- ports, image, resources, security --------------------------------------------------------

def _entrypoint(commands) -> list[str]:
    (entrypoint,) = _instructions(_final_stage(commands), "ENTRYPOINT")
    assert entrypoint.json, "ENTRYPOINT must be in exec (JSON) form so that signals reach inferx-serve"
    return list(entrypoint.value)


def test_ports_agree_across_dockerfile_deployment_service_and_kserve(dockerfile, deployment, isvc):
    entrypoint = _entrypoint(dockerfile)
    http, grpc = int(_flag(entrypoint, "--port")), int(_flag(entrypoint, "--grpc-port"))
    assert (http, grpc) == (8000, 8001) and _flag(entrypoint, "--host") == "0.0.0.0"
    exposed = {int(p.split("/")[0]) for c in _instructions(dockerfile, "EXPOSE") for p in c.value}
    assert exposed == {http, grpc}

    container = _container(deployment)
    assert "command" not in container and "args" not in container  # the image's ENTRYPOINT as is
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": http, "grpc": grpc}

    service = _one("Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    targets = {p["name"]: _port_number(container, p["targetPort"]) for p in service["spec"]["ports"]}
    assert targets == {"http": http, "grpc": grpc}

    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and int(annotations["prometheus.io/port"]) == http

    kserve = _isvc_container(isvc)
    argv = kserve["command"] + kserve["args"]
    assert argv[0] == entrypoint[0]
    assert [int(_flag(argv, "--port")), int(_flag(argv, "--grpc-port"))] == [http, grpc]
    assert [p["containerPort"] for p in kserve["ports"]] == [http, grpc]  # KServe: the first is HTTP
    assert [p["name"] for p in kserve["ports"]] == ["http1", "h2c"]
    assert int(isvc["metadata"]["annotations"]["prometheus.kserve.io/port"]) == http


def test_entrypoint_flags_are_inferx_serve_options(dockerfile, isvc):
    from inferx_compiler.cli.serve import command

    options = {opt for p in command.params for opt in getattr(p, "opts", [])}
    argv = _entrypoint(dockerfile)
    kserve = _isvc_container(isvc)
    flags = {a for a in argv[1:] + kserve["args"] if a.startswith("--")}
    assert flags == {"--model-repository", "--host", "--port", "--grpc-port"}
    assert flags <= options


def test_model_repository_is_the_mounted_volume(dockerfile, deployment, isvc):
    repository = _flag(_entrypoint(dockerfile), "--model-repository")
    container = _container(deployment)
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == repository)
    assert mount.get("readOnly") is True
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert claim == _one("PersistentVolumeClaim")["metadata"]["name"]
    # KServe mounts the STORAGE_URI's claim at /mnt/models
    env = {e["name"]: e.get("value") for e in _isvc_container(isvc)["env"]}
    assert env["STORAGE_URI"] == f"pvc://{claim}"
    assert _flag(_isvc_container(isvc)["args"], "--model-repository") == "/mnt/models"


def test_dockerfile_base_install_and_user(dockerfile, deployment):
    froms = [c.value[0] for c in _instructions(dockerfile, "FROM")]
    assert froms and all(f == "python:3.11-slim" for f in froms), froms
    runs = " ".join(" ".join(c.value) for c in _instructions(dockerfile, "RUN"))
    assert "pip install --no-cache-dir ." in runs
    (user,) = _instructions(_final_stage(dockerfile), "USER")
    uid = user.value[0].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric, so that runAsNonRoot can verify it
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] == int(uid)


def test_dockerignore_keeps_what_pip_install_needs():
    """`*` then `!NAME` lines: the context must hold pyproject.toml, its readme and every
    package folder of [tool.setuptools] package-dir."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {d.split("/")[0] for d in project["tool"]["setuptools"]["package-dir"].values()}
    lines = [l.strip() for l in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()]
    patterns = [l for l in lines if l and not l.startswith("#")]
    assert patterns[0] == "*"
    included = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert needed <= included, f"excluded from the build context: {sorted(needed - included)}"
    assert all((ROOT / name).exists() for name in included)


_UNITS = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
          "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}


def _quantity(text) -> float:
    """A Kubernetes quantity ("500m", "2", "4Gi") as a number."""
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    assert match and match.group(2) in _UNITS, f"not a quantity: {text!r}"
    return float(match.group(1)) * _UNITS[match.group(2)]


def test_resources_have_requests_and_limits(deployment, isvc):
    for container in (_container(deployment), _isvc_container(isvc)):
        resources = container["resources"]
        for name in ("cpu", "memory"):
            request, limit = _quantity(resources["requests"][name]), _quantity(resources["limits"][name])
            assert 0 < request <= limit, (container["name"], name)
    assert _container(deployment)["resources"] == _isvc_container(isvc)["resources"]


def test_containers_run_locked_down(deployment, isvc):
    for spec, container in ((deployment["spec"]["template"]["spec"], _container(deployment)),
                            (isvc["spec"]["predictor"], _isvc_container(isvc))):
        assert spec["securityContext"]["runAsNonRoot"] is True
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        if security.get("readOnlyRootFilesystem"):  # then temporary files need a writable /tmp
            tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
            assert "emptyDir" in next(v for v in spec["volumes"] if v["name"] == tmp["name"])


def test_quantity_parser_refuses_nonsense():
    assert _quantity("500m") == 0.5 and _quantity("4Gi") == 4 * 2 ** 30
    with pytest.raises(AssertionError):
        _quantity("4 gigs")
