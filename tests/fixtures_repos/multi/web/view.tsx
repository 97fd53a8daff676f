export class View {
  mount(): void {}
}

export function Badge(props: { label: string }) {
  return <span className="badge">{props.label}</span>;
}
