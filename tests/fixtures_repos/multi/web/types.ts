/** A shape with an area. */
export interface Shape {
  area(): number;
}

export type Point = { x: number; y: number };

export enum Color { Red, Green }

/** A square. */
export class Square implements Shape {
  constructor(private side: number) {}

  area(): number {
    return this.side * this.side;
  }
}

export function totalArea(shapes: Shape[]): number {
  return shapes.reduce((sum, s) => sum + s.area(), 0);
}
