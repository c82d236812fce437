import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { SecretCipher, createClusterCa, generateKey } from '@space/control-plane';
import { GatewayCa, persistentValue } from '@space/node';
import { renderKubernetesJson, renderKubernetesYaml } from '../kubernetes/render.js';
import { defaultSecretNames, readKubernetesValues } from '../kubernetes/values.js';

/** `space kubernetes render|secrets`: SPACE's manifests for a values file, and the keys its Secrets hold. */
export function registerKubernetesCommands(program: Command): void {
  const kubernetes = program.command('kubernetes').description('run SPACE on Kubernetes: its manifests, and the keys of its Secrets (docs/kubernetes.md)');
  kubernetes
    .command('render')
    .description('the manifests for a values file (YAML or JSON), each checked against Kubernetes\' schemas: apply them with "kubectl apply -f"')
    .requiredOption('--values <file>', 'the values (deploy/kubernetes/values/*.yaml are examples)')
    .option('--out <file>', 'write them to a file instead of standard output')
    .option('--json', 'a Kubernetes List in JSON instead of YAML')
    .action((opts: { values: string; out?: string; json?: boolean }) => {
      const values = readKubernetesValues(opts.values);
      const text = opts.json ? renderKubernetesJson(values) : renderKubernetesYaml(values, opts.values);
      if (opts.out) writeFileSync(opts.out, text);
      else process.stdout.write(text);
    });
  kubernetes
    .command('secrets')
    .description(
      "make the keys SPACE's Secrets hold (admin key, secrets key, cluster CA, gateway CA) in --dir, unless there, and print the kubectl commands that store them",
    )
    .requiredOption('--dir <dir>', 'where to keep them (root only; back it up with the database, apart from the object store)')
    .option('--namespace <name>', 'the namespace of the values', 'space')
    .option('--json', 'print JSON')
    .action(async (opts: { dir: string; namespace: string; json?: boolean }) => {
      const dir = path.resolve(opts.dir);
      const file = (name: string) => path.join(dir, name);
      await persistentValue(file('admin-key'), generateKey);
      // Made as a control plane makes its SPACE_SECRETS_KEY_FILE.
      await SecretCipher.load(file('secrets-key'));
      await createClusterCa(file('cluster-ca'));
      await new GatewayCa(file('gateway-ca')).load();
      const ns = `--namespace ${opts.namespace}`;
      const commands = [
        `kubectl create namespace ${opts.namespace}`,
        `kubectl ${ns} create secret generic ${defaultSecretNames.name} --from-file=admin-key=${file('admin-key')} --from-file=secrets-key=${file('secrets-key')} --from-literal=database-url="$DATABASE_URL"`,
        `kubectl ${ns} create secret generic ${defaultSecretNames.clusterCa} --from-file=${file('cluster-ca/ca.crt')} --from-file=${file('cluster-ca/ca.key')}`,
        `kubectl ${ns} create secret generic ${defaultSecretNames.gatewayCa} --from-file=${file('gateway-ca/ca.crt')} --from-file=${file('gateway-ca/ca.key')}`,
      ];
      if (opts.json) process.stdout.write(`${JSON.stringify({ dir, commands })}\n`);
      else
        process.stdout.write(
          [
            `the keys are in ${dir} (made now where missing); store them as Secrets, with your database's URL in DATABASE_URL:`,
            '',
            ...commands.map((c) => `  ${c}`),
            '',
            'then, once the control planes answer, a join token for the sandbox hosts (docs/kubernetes.md):',
            `  kubectl ${ns} patch secret ${defaultSecretNames.name} -p "{\\"stringData\\":{\\"node-join-token\\":\\"$(space node join-token --uses 100 --ttl 7776000 --json | jq -r .token)\\"}}"`,
            '',
          ].join('\n'),
        );
    });
}
