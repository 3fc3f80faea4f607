#!/bin/sh
# Makes a throw-away certificate authority and, signed by it, a broker certificate and a
# client certificate, as PEM files for odradek's TLS listeners (ssl.keystore.location,
# ssl.truststore.location) and for clients (ssl.ca.location, ssl.certificate.location,
# ssl.key.location). For tests and trials only: the CA's key sits beside its certificate.
#
#   deploy/make-test-certs.sh DIR [BROKER_HOST ...]
#
# DIR gets ca.pem, ca.key, broker.pem (key + chain, the broker's keystore), broker.key,
# broker.crt, client.pem (key + chain), client.key, client.crt. The broker certificate names
# localhost, 127.0.0.1 and each BROKER_HOST given.
set -eu
dir=${1:?usage: make-test-certs.sh DIR [BROKER_HOST ...]}
shift
mkdir -p "$dir"
cd "$dir"
days=825

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days "$days" \
    -subj "/O=odradek test/CN=odradek test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null

names="DNS:localhost,IP:127.0.0.1"
for host in "$@"; do
    case $host in
        *[!0-9.]*) names="$names,DNS:$host" ;;
        *) names="$names,IP:$host" ;;
    esac
done

sign() { # sign NAME SUBJECT EXTENSIONS
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days "$days" -extfile "$1.ext" 2>/dev/null
    cat "$1.key" "$1.crt" ca.pem > "$1.pem"
    rm -f "$1.csr" "$1.ext"
}

sign broker "/O=odradek test/CN=localhost" \
    "subjectAltName=$names
extendedKeyUsage=serverAuth"
sign client "/O=odradek test/OU=clients/CN=client" "extendedKeyUsage=clientAuth"
chmod 600 ./*.key ./*.pem
chmod 644 ca.pem
echo "made ca.pem, broker.pem, client.pem (and their keys) in $(pwd)"
