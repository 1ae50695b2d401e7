"""Admin calls to the local Keystone for hack/neutron/keystone.sh (Debian's /usr/bin/python3, standard library only).

Usage: keystone-admin.py projects <keystone-v3-url>                 projects/users k8s and other (role member)
       keystone-admin.py register <keystone-v3-url> <neutron-url>   network service + public/internal/admin endpoints

Both act as admin (password admin-pw, from keystone-manage bootstrap) and are idempotent: an existing project, user or
service is reused, and the network endpoints are replaced.
"""
import json
import sys
import time
import urllib.error
import urllib.request


def call(url, method, path, body=None, token=None, tries=4):
    # Keystone under uwsgi can be slow to answer its first requests on a loaded machine: generous timeout, and
    # transport failures retried (a retried create that had committed answers 409, handled by ensure()).
    for attempt in range(tries):
        req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={'content-type': 'application/json', **({'x-auth-token': token} if token else {})})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.headers.get('x-subject-token'), (json.loads(r.read() or b'null'))
        except urllib.error.HTTPError:
            raise
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(2)


def ensure(url, kind, body, token):
    # POST /<kind>s, or the existing one of that name (409: created by an earlier, timed-out attempt).
    try:
        return call(url, 'POST', f'/{kind}s', {kind: body}, token)[1][kind]
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise
        return call(url, 'GET', f"/{kind}s?name={body['name']}", token=token)[1][kind + 's'][0]


def admin_token(url):
    token, _ = call(url, 'POST', '/auth/tokens', {'auth': {'identity': {'methods': ['password'], 'password': {'user': {
        'name': 'admin', 'domain': {'id': 'default'}, 'password': 'admin-pw'}}}, 'scope': {'project': {'name': 'admin', 'domain': {'id': 'default'}}}}})
    return token


def projects(url):
    token = admin_token(url)
    roles = {r['name']: r['id'] for r in call(url, 'GET', '/roles', token=token)[1]['roles']}
    for name in ('k8s', 'other'):
        p = ensure(url, 'project', {'name': name, 'domain_id': 'default'}, token)
        u = ensure(url, 'user', {'name': name, 'domain_id': 'default', 'password': name + '-pw', 'default_project_id': p['id']}, token)
        call(url, 'PUT', f"/projects/{p['id']}/users/{u['id']}/roles/{roles['member']}", token=token)


def register(url, nurl):
    token = admin_token(url)
    services = call(url, 'GET', '/services?type=network', token=token)[1]['services']
    sid = services[0]['id'] if services else call(url, 'POST', '/services', {'service': {'type': 'network', 'name': 'neutron'}}, token)[1]['service']['id']
    for e in call(url, 'GET', f'/endpoints?service_id={sid}', token=token)[1]['endpoints']:
        call(url, 'DELETE', f"/endpoints/{e['id']}", token=token)
    for iface in ('public', 'internal', 'admin'):
        call(url, 'POST', '/endpoints', {'endpoint': {'service_id': sid, 'interface': iface, 'region_id': 'RegionOne', 'url': nurl}}, token)


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'projects':
        projects(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == 'register':
        register(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
